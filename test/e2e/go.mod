module github.com/cellfleet/cellfleet/test/e2e

go 1.26.0
