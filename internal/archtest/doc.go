// Package archtest keeps the architecture as tests: the import edges allowed
// between the module's packages and the paths never to be reached, read from
// docs/ARCHITECTURE.md and checked against every package's imports the way Go's
// go/build/deps_test.go checks the standard library's (deps_test.go,
// never_test.go); the sizes a reader can take in, with the exceptions and their
// reasons (sizes_test.go); and that every repository path a comment or a document
// cites exists (citations_test.go). It has no code.
package archtest
