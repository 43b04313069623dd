//go:build race

package main

// raceBuild: the tests run with -race, and so does the binary they build.
const raceBuild = true
