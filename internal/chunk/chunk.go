// Package chunk decides how many rows each copy or checksum statement covers.
// It is pure logic: a Sizer is fed the time each chunk took and answers with
// the next size, aiming at a target time per chunk so that every statement
// stays short (short row locks, short transactions) whatever the row width or
// the server's load.
package chunk

import (
	"sync"
	"time"
)

// DefaultTarget is the wanted duration of one copy statement. Under load a
// chunk's commit waits in the binary log's group commit beside the
// application's; longer chunks spread that wait over more rows.
const DefaultTarget = 250 * time.Millisecond

// Config bounds a Sizer. Zero fields take defaults.
type Config struct {
	Target  time.Duration // wanted duration of one chunk (default DefaultTarget)
	Initial int           // first chunk size in rows (default 1000)
	Min     int           // default 100
	Max     int           // default 50000
	// Limit, if set, caps Target while it returns more than zero; a size is
	// cut down to the cap at once, not halved step by step (the replica lag
	// throttle lowers it when a replica falls behind: every chunk in flight
	// is work the replica has still to do).
	Limit func() time.Duration
}

func (c Config) withDefaults() Config {
	if c.Target <= 0 {
		c.Target = DefaultTarget
	}
	if c.Min <= 0 {
		c.Min = 100
	}
	if c.Max <= 0 {
		c.Max = 50000
	}
	if c.Max < c.Min {
		c.Max = c.Min
	}
	if c.Initial <= 0 {
		c.Initial = 1000
	}
	c.Initial = clamp(c.Initial, c.Min, c.Max)
	return c
}

// Sizer adapts the chunk size. It is safe for concurrent use.
type Sizer struct {
	cfg  Config
	mu   sync.Mutex // protects size
	size int
}

// NewSizer returns a Sizer starting at cfg.Initial rows.
func NewSizer(cfg Config) *Sizer {
	cfg = cfg.withDefaults()
	return &Sizer{cfg: cfg, size: cfg.Initial}
}

// Size returns the rows the next chunk should hold.
func (s *Sizer) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// SetTarget changes the wanted duration of one chunk while the copy runs;
// the size moves towards it as chunks are observed.
func (s *Sizer) SetTarget(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d > 0 {
		s.cfg.Target = d
	}
}

// Target returns the wanted duration of one chunk.
func (s *Sizer) Target() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Target
}

// Observe records that a chunk of rows rows took d, and adapts the size.
func (s *Sizer) Observe(rows int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.cfg
	if cfg.Limit != nil {
		if l := cfg.Limit(); l > 0 && l < cfg.Target {
			cfg.Target = l
			s.size = Next(cfg, s.size, rows, d)
			if rows >= cfg.Min/2 && d > 0 {
				s.size = clamp(min(s.size, int(float64(rows)*float64(l)/float64(d))), cfg.Min, cfg.Max)
			}
			return
		}
	}
	s.size = Next(cfg, s.size, rows, d)
}

// Next returns the chunk size to use after a chunk of rows rows took d when the
// size was current. It moves towards the size that would take cfg.Target, at
// most doubling or halving per step, and ignores chunks too small to measure.
func Next(cfg Config, current, rows int, d time.Duration) int {
	cfg = cfg.withDefaults()
	if rows < cfg.Min/2 || d <= 0 {
		// A partial last chunk or an empty range says nothing about speed.
		return clamp(current, cfg.Min, cfg.Max)
	}
	ideal := float64(rows) * float64(cfg.Target) / float64(d)
	// Smooth: go half way to the ideal.
	next := (float64(current) + ideal) / 2
	if next > 2*float64(current) {
		next = 2 * float64(current)
	}
	if next < float64(current)/2 {
		next = float64(current) / 2
	}
	return clamp(int(next), cfg.Min, cfg.Max)
}

func clamp(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
