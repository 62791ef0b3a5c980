module github.com/cellfleet/cellfleet/hack/cluster/crictl

go 1.26.6

require sigs.k8s.io/cri-tools v1.37.0
