// Command sluice changes the schema of a busy MySQL table online.
//
//	sluice migrate --host H --port P --user U --database D --table T --alter "..."
//
// The password comes from --password-file, MYSQL_PWD or an option file
// (--defaults-file), never from the command line. Exit code 0 means the table
// was changed; 1 means it was not, and the message says why.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	// sluice spends its time waiting for the server: its goroutines block
	// and wake on the network thousands of times a second. With more than one
	// P the Go scheduler spins idle threads looking for work at each wake-up,
	// which cost sluice about 40% more CPU than one P on a 2-core server
	// shared with mysqld, taken from the server and its load, and sped up
	// nothing: every statement's work is done by the server. The GOMAXPROCS
	// environment variable still overrides this.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// A terminal's Ctrl-Z would suspend sluice wherever it is, holding the
	// cut-over's locks (the application's writes wait for as long as it
	// stays suspended), the binlog connection and the run lock: it is
	// ignored, and sluice ctl pause pauses a run.
	signal.Ignore(syscall.SIGTSTP)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	pprof.StopCPUProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice: "+oneLine(err))
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Online schema changes for busy MySQL tables",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v (see 'sluice %s --help')", err, c.Name())
	})
	// --cpu-profile writes a Go CPU profile of the run, for performance
	// reports (go tool pprof sluice FILE).
	profile := root.PersistentFlags().String("cpu-profile", "", "write a CPU profile of sluice itself to this file")
	_ = root.PersistentFlags().MarkHidden("cpu-profile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if *profile == "" {
			return nil
		}
		f, err := os.Create(*profile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		return pprof.StartCPUProfile(f)
	}
	root.AddCommand(newMigrate(), newPlan(), newAdvise(), newCutover(), newCtl(), newVersion(), newReference())
	return root
}

var version = "dev"

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sluice's version",
		Args:  cobra.NoArgs,
		Run:   func(c *cobra.Command, _ []string) { fmt.Fprintln(c.OutOrStdout(), "sluice", version) },
	}
}

// oneLine flattens an error to a single line.
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		return errors.Unwrap(err).Error()
	}
	return strings.Join(parts, "; ")
}
