// Package importrules holds no code, only the test that enforces the import
// rules the other packages' doc comments state (which packages each one may
// not depend on): rules_test.go lists each rule with the packages it names,
// and fails when a package reaches a forbidden one (directly or through
// others, by `go list -deps`) or when a doc comment states a rule the list
// lacks. architecture_test.go holds the package table of
// docs/architecture.md to the same rules, plus the few that only the table
// states, and fails when a package under api/, cmd/ or internal/ is missing
// from it.
package importrules
