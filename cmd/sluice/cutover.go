package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/migration"
)

func newCutover() *cobra.Command {
	var f migrateFlags
	var cancel bool
	c := &cobra.Command{
		Use:   "cutover",
		Short: "Let a migration started with --postpone-cutover swap the tables now (or cancel it)",
		Long: `cutover tells a running 'sluice migrate --postpone-cutover' of the table to
swap: it drops the table _<table>_cutover that the migration watches (a plain
DROP TABLE of it does the same). The migration then takes its bounded table lock,
applies the last changes and renames. With --cancel, the migration stops
instead, drops its new table and leaves the original as it was.

It can run from any host that reaches the database. Name every table of a
group migrated together (--table repeated): the group swaps once all may.`,
		Example: `  sluice cutover --host db1 --user dba --database shop --table orders
  sluice cutover --cancel --host db1 --user dba --database shop --table orders`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.pairs(false); err != nil {
				return err
			}
			conn, database, err := tableConnection(c, f)
			if err != nil {
				return err
			}
			if err := conn.Validate(); err != nil {
				return err
			}
			db, err := dbconn.Open(c.Context(), conn, database, 1)
			if err != nil {
				return err
			}
			defer db.Close()
			out := c.OutOrStdout()
			var errs []error // each table is told, whatever another says
			for _, table := range f.tables {
				if cancel {
					if err := migration.CancelCutover(c.Context(), db, database, table); err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintf(out, "sluice: asked the migration of %s.%s to cancel; it drops its new table and leaves the original unchanged\n", database, table)
					continue
				}
				if err := migration.TriggerCutover(c.Context(), db, database, table); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(out, "sluice: the migration of %s.%s may cut over now; its own output says when the tables are swapped\n", database, table)
			}
			return errors.Join(errs...)
		},
	}
	serverFlags(c, &f)
	c.Flags().BoolVar(&cancel, "cancel", false, "stop the migration instead: no swap, the original stays as it was")
	return c
}
