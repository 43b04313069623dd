package migration

import "os"

// A child process of the kill tests dies at the failpoint SLUICE_FAILPOINT
// names, at once and without cleaning up, as if killed there.
func init() {
	if at := os.Getenv("SLUICE_FAILPOINT"); at != "" {
		failpoint = func(name string) {
			if name == at {
				os.Exit(9)
			}
		}
	}
}
