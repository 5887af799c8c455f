// Package archtest keeps the architecture as a test: the import edges allowed between
// the module's packages (and to the few libraries they use), checked against every
// package's imports the way Go's go/build/deps_test.go checks the standard library's.
// It has no code; deps_test.go holds the rules.
package archtest
