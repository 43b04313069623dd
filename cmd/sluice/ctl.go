package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/control"
	"github.com/sluicedb/sluice/migration"
)

func newCtl() *cobra.Command {
	var socket, database, table string
	c := &cobra.Command{
		Use:   "ctl COMMAND [NAME=VALUE]",
		Short: "Steer a running migration through its control socket: status, pause, resume, set, cutover, postpone, abort",
		Long: `ctl sends one command to a running 'sluice migrate' on the same host, through
the unix socket it listens on (its path is in its first log lines; by default
it is found from --database and --table):

  status              the run's state as JSON: phase, rows copied and estimated,
                      rate, ETA, backlog, changes applied, binlog and replica lag,
                      why the copy is throttled, lock waits, live settings
  pause               stop copying and applying (a true pause; the binlog is
                      still read); no phase that writes or locks starts
  resume              go on after a pause
  set NAME=VALUE      threads=N (copy workers), chunk-time=DURATION,
                      max-load=Name=N[,Name=N], max-lag=DURATION, applied at once;
                      ignore-replica=HOST:PORT stops watching a replica that is
                      gone for good (one that cannot be reached holds the copy)
  postpone            keep the new table in sync after the checksum instead of
                      swapping, until 'ctl cutover'
  cutover             let a postponed cut-over go ahead
  abort               stop the run: the new table is dropped, the original stays
                      as it was

No SQL is accepted over the socket.`,
		Example: `  sluice ctl --database shop --table orders status
  sluice ctl --socket /run/user/1000/sluice/shop.orders.sock set threads=2`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			line := strings.Join(args, " ")
			if _, err := control.Parse(line); err != nil {
				return err
			}
			path := socket
			if path == "" {
				if database == "" || table == "" {
					return errors.New("name the run: --socket PATH, or --database and --table")
				}
				var err error
				if path, err = control.Find(database, table); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithTimeout(c.Context(), 2*time.Minute)
			defer cancel()
			r, err := control.Send(ctx, path, line)
			if err != nil {
				return err
			}
			if !r.OK {
				return errors.New(r.Error)
			}
			out := c.OutOrStdout()
			if r.Status != nil {
				var v any
				if err := json.Unmarshal(r.Status, &v); err != nil {
					return err
				}
				b, _ := json.MarshalIndent(v, "", "  ")
				fmt.Fprintln(out, string(b))
				return nil
			}
			fmt.Fprintln(out, "sluice:", r.Message)
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&socket, "socket", "", "the run's control socket (default: found from --database and --table)")
	fl.StringVar(&database, "database", "", "database of the migrated table")
	fl.StringVar(&table, "table", "", "the migrated table")
	return c
}

// runTarget is a migration as the control socket sees it.
type runTarget struct{ *migration.Runner }

func (t runTarget) StatusJSON() ([]byte, error) { return json.Marshal(t.Status()) }

// controlSockets opens each run's control socket as New makes it; close
// closes them all.
type controlSockets struct {
	path    string // --control-socket ("": the default of each table)
	server  string // HOST:PORT, in the default socket's name
	ctx     context.Context
	log     *slog.Logger
	servers []*control.Server
}

// attach listens on the run's socket (migration.Config.Attach). A socket
// the operator named must open; the default one may not (its directory
// refused, say), and the run then goes on without it, saying why.
func (s *controlSockets) attach(r *migration.Runner) error {
	st := r.Status()
	path, err := s.path, error(nil)
	switch {
	case path == "":
		path, err = control.DefaultPath(s.server, st.Database, st.Table)
	case len(s.servers) > 0:
		return errors.New("--control-socket names one socket: leave it out when migrating several tables (each gets its own)")
	}
	var srv *control.Server
	if err == nil {
		srv, err = control.Listen(path)
	}
	if err != nil && s.path == "" {
		s.log.Warn("no control socket for this run; sluice ctl cannot reach it (--control-socket PATH names another)", "table", st.Table, "why", err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	s.servers = append(s.servers, srv)
	go srv.Serve(s.ctx, runTarget{r})
	args := []any{"table", st.Table, "socket", path, "status", "sluice ctl --socket " + path + " status"}
	if srv.Stale {
		args = append(args, "replaced", "a socket file a stopped run left")
	}
	s.log.Info("control socket", args...)
	return nil
}

func (s *controlSockets) close() {
	for _, srv := range s.servers {
		srv.Close()
	}
}
