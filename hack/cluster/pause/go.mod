module github.com/cellfleet/cellfleet/hack/cluster/pause

go 1.26.0
