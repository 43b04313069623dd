package main

import (
	"os"
	"strings"
	"testing"
)

// TestFlagReferenceIsCurrent: docs/FLAGS.md is what sluice reference
// prints, so the reference cannot drift from the flags.
func TestFlagReferenceIsCurrent(t *testing.T) {
	var b strings.Builder
	writeReference(&b, newRoot())
	want, err := os.ReadFile("../../docs/FLAGS.md")
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatal("docs/FLAGS.md is out of date: run go run ./cmd/sluice reference > docs/FLAGS.md")
	}
	for _, cmd := range []string{"## sluice migrate", "## sluice plan", "## sluice advise", "## sluice ctl", "## sluice cutover", "`--alter`", "`--lock-wait`"} {
		if !strings.Contains(b.String(), cmd) {
			t.Errorf("the reference lacks %s", cmd)
		}
	}
}
