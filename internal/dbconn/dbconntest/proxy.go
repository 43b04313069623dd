// Package dbconntest has a TCP proxy in front of the test server, for tests
// that break sluice's connections the way a network does.
package dbconntest

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Proxy forwards connections to a server until the test ends.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	conns   map[*pair]bool
	refuse  bool
	swallow []byte // a query prefix; see Swallow
	left    int
	cuts    int
}

type pair struct {
	client, server net.Conn
	// swallowing: the query was sent; the reply is dropped and the
	// connection cut when it comes.
	mu         sync.Mutex
	swallowing bool
}

// New starts a proxy to the server of c and returns it.
func New(t testing.TB, c dbconn.Config) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), ln: ln, conns: map[*pair]bool{}}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	return p
}

// Config returns c with the proxy's address.
func (p *Proxy) Config(c dbconn.Config) dbconn.Config {
	a := p.ln.Addr().(*net.TCPAddr)
	c.Host, c.Port = a.IP.String(), a.Port
	return c
}

// Cut closes every connection open through the proxy, on both sides.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
		delete(p.conns, c)
	}
}

// Refuse makes the proxy close new connections at once (on) or forward them
// again (off).
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Swallow makes the next n queries that start with prefix reach the server,
// and cuts their connection as soon as the server answers, before the client
// sees the answer: the statement ran (and committed, in autocommit) but the
// client only knows that the connection broke.
func (p *Proxy) Swallow(prefix string, n int) {
	p.mu.Lock()
	p.swallow, p.left = []byte(prefix), n
	p.mu.Unlock()
}

// Swallowed returns how many answers were swallowed.
func (p *Proxy) Swallowed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &pair{client: client, server: server}
		p.mu.Lock()
		p.conns[c] = true
		p.mu.Unlock()
		go p.up(c)
		go p.down(c)
	}
}

func (p *Proxy) close(c *pair) {
	c.client.Close()
	c.server.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// up copies the client's packets to the server, marking a swallowed query.
func (p *Proxy) up(c *pair) {
	defer p.close(c)
	buf := make([]byte, 64<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			// A COM_QUERY packet: 3 bytes of length, a sequence byte, 0x03.
			p.mu.Lock()
			if p.left > 0 && n > 5 && buf[4] == 0x03 && bytes.HasPrefix(buf[5:n], p.swallow) {
				p.left--
				c.mu.Lock()
				c.swallowing = true
				c.mu.Unlock()
			}
			p.mu.Unlock()
			if _, err := c.server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down copies the server's answers to the client, or cuts the connection
// at the answer to a swallowed query.
func (p *Proxy) down(c *pair) {
	defer p.close(c)
	buf := make([]byte, 64<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			c.mu.Lock()
			swallow := c.swallowing
			c.mu.Unlock()
			if swallow {
				p.mu.Lock()
				p.cuts++
				p.mu.Unlock()
				return
			}
			if _, err := c.client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
