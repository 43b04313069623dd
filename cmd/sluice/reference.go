package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newReference is the hidden command that writes docs/FLAGS.md: every
// command's description and flags, from the flags themselves (a test keeps
// the file equal to its output).
func newReference() *cobra.Command {
	return &cobra.Command{
		Use:    "reference",
		Short:  "Print the flag reference as Markdown (docs/FLAGS.md)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			writeReference(c.OutOrStdout(), c.Root())
			return nil
		},
	}
}

func writeReference(w io.Writer, root *cobra.Command) {
	fmt.Fprintln(w, "# sluice: every command and flag")
	fmt.Fprintln(w, "\nWritten by `sluice reference` from the flags themselves. Passwords are never flags: use `MYSQL_PWD`, `--password-file` or `--defaults-file`.")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			fmt.Fprintf(w, "\n## %s\n\n%s\n", sub.CommandPath(), sub.Short)
			if sub.Long != "" {
				fmt.Fprintf(w, "\n%s\n", sub.Long)
			}
			if sub.Example != "" {
				fmt.Fprintf(w, "\n```\n%s\n```\n", strings.Trim(sub.Example, "\n"))
			}
			if sub.HasAvailableLocalFlags() {
				fmt.Fprintln(w, "\n| flag | default | meaning |\n|---|---|---|")
				sub.LocalFlags().VisitAll(func(f *pflag.Flag) {
					if f.Hidden || f.Name == "help" {
						return
					}
					def := f.DefValue
					if def == "[]" || def == "false" && f.Value.Type() == "bool" {
						def = ""
					}
					fmt.Fprintf(w, "| `--%s` | %s | %s |\n", f.Name, cell(def), cell(f.Usage))
				})
			}
			walk(sub)
		}
	}
	walk(root)
}

// cell escapes a table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
