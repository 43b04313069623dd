package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Running the timed tools (sluice, pt-online-schema-change) and reading
// sluice's log.

// runSluiceOn runs the sluice binary on a table of the benchmark database and
// returns its peak resident memory in MB and its phase timings.
//
// With watch, it reads sluice's status through its control socket while it
// runs and measures how honest the copy's ETA is (eta.go); other builds
// (--compare-with) may have no socket.
func (s *Server) runSluiceOn(ctx context.Context, bin, table, alter string, extra []string, watch bool) (opResult, error) {
	args := append([]string{"migrate", "--host", s.Conn.Host, "--port", strconv.Itoa(s.Conn.Port),
		"--user", s.Conn.User, "--database", benchDB, "--table", table, "--alter", alter, "--drop-old",
		"--progress-interval", "1h"}, extra...)
	var samples <-chan []etaSample
	stopWatch := func() {}
	if watch {
		dir, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return opResult{}, err
		}
		defer os.RemoveAll(dir)
		socket := filepath.Join(dir, "run.sock")
		args = append(args, "--control-socket", socket)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		samples, stopWatch = watchETA(wctx, socket), cancel
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	if s.Conn.Password != "" {
		cmd.Env = append(cmd.Env, "MYSQL_PWD="+s.Conn.Password)
	}
	out, err := cmd.CombinedOutput()
	stopWatch()
	s.keepLog(table, out)
	rss := 0.0
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && cmd.ProcessState != nil {
		rss = float64(ru.Maxrss) / 1024
	}
	if err != nil {
		return opResult{rssMB: rss}, fmt.Errorf("sluice: %v: %s", err, lastLine(string(out)))
	}
	res := opResult{rssMB: rss, phases: phaseTimes(string(out)), spans: phaseSpans(string(out))}
	for _, sp := range res.spans {
		if sp.name == "catch-up" {
			res.catchUp = sp.to.Sub(sp.from)
		}
	}
	if m := replicasLine.FindStringSubmatch(string(out)); m != nil {
		res.replicas = m[1]
	}
	res.slowest, res.target, res.slowRows = parseSlowest(string(out))
	if samples != nil {
		if q, h, ok := etaErrors(<-samples); ok {
			res.eta = &[2]float64{q, h}
		}
	}
	return res, nil
}

// keepLog writes one sluice run's output into s.Logs, if set.
func (s *Server) keepLog(table string, out []byte) {
	if s.Logs == "" {
		return
	}
	if err := os.MkdirAll(s.Logs, 0o755); err != nil {
		logf("logs: %v", err)
		return
	}
	s.runs++
	name := filepath.Join(s.Logs, fmt.Sprintf("%03d-sluice-%s.log", s.runs, table))
	if err := os.WriteFile(name, out, 0o644); err != nil {
		logf("logs: %v", err)
	}
}

// replicasLine is sluice's summary of the replicas it watched.
var replicasLine = regexp.MustCompile(`(?m)^sluice: replicas (.*)$`)

// phaseSpan is one sluice phase on the wall clock.
type phaseSpan struct {
	name     string
	from, to time.Time
}

var phaseMark = regexp.MustCompile(`time=(\S+) level=\w+ msg="phase (start|done)" phase=(\S+)`)

// phaseSpans reads sluice's phases from its log.
func phaseSpans(log string) []phaseSpan {
	var out []phaseSpan
	open := map[string]time.Time{}
	for _, m := range phaseMark.FindAllStringSubmatch(log, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if m[2] == "start" {
			open[m[3]] = at
		} else if from, ok := open[m[3]]; ok {
			out = append(out, phaseSpan{name: m[3], from: from, to: at})
			delete(open, m[3])
		}
	}
	return out
}

// phasesIn names the phases that overlap [from, to), in order, or says that
// none does.
func phasesIn(spans []phaseSpan, from, to time.Time) []string {
	var names []string
	for _, sp := range spans {
		if sp.from.Before(to) && sp.to.After(from) {
			names = append(names, sp.name)
		}
	}
	if len(names) == 0 {
		names = []string{"no phase (before or after sluice ran)"}
	}
	return names
}

var phaseDone = regexp.MustCompile(`msg="phase done" phase=(\S+) took=(\S+)`)

// phaseTimes extracts "copy 3.9 index 1.1 ..." from sluice's log.
func phaseTimes(log string) string {
	var parts []string
	for _, m := range phaseDone.FindAllStringSubmatch(log, -1) {
		d, err := time.ParseDuration(m[2])
		if err != nil || d < 50*time.Millisecond {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", m[1], d.Seconds()))
	}
	return strings.Join(parts, ", ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// runPtOsc runs pt-online-schema-change with its defaults on the benchmark
// table, and the extra options (the replica round's lag check). It looks for
// no replica itself: the other rounds run with the replicas down.
// It returns the tool's output.
func (s *Server) runPtOsc(ctx context.Context, command, alter string, extra ...string) (string, error) {
	dsn := fmt.Sprintf("h=%s,P=%d,u=%s,D=%s,t=sbtest1", s.Conn.Host, s.Conn.Port, s.Conn.User, benchDB)
	args := append([]string{"--execute", "--alter", alter, "--recursion-method=none", "--no-check-alter"}, extra...)
	return s.runPtOscOut(ctx, command, append(args, dsn)...)
}

// runPtOscArgs runs the pt-online-schema-change command with args.
func (s *Server) runPtOscArgs(ctx context.Context, command string, args ...string) error {
	_, err := s.runPtOscOut(ctx, command, args...)
	return err
}

// runPtOscOut runs the pt-online-schema-change command with args and
// returns its output.
func (s *Server) runPtOscOut(ctx context.Context, command string, args ...string) (string, error) {
	parts := strings.Fields(command)
	cmd := exec.CommandContext(ctx, parts[0], append(parts[1:], args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pt-online-schema-change: %v: %s", err, lastLine(string(out)))
	}
	return string(out), nil
}
