package dbconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TLSModes are the accepted values of the "tls" parameter.
var TLSModes = []string{"false", "true", "skip-verify", "preferred"}

// TLSFiles are the operator's TLS material: a CA to verify the server with,
// a client certificate and key to present, and the name the server's
// certificate must carry when it is not the host sluice dials.
type TLSFiles struct {
	CA, Cert, Key string
	ServerName    string
}

// Set reports whether any is given.
func (f TLSFiles) Set() bool { return f != TLSFiles{} }

// TLS returns the TLS configuration of every connection (the SQL driver's
// and the binlog reader's alike): nil for none, a verifying config for
// "true" (against the system's CAs, or TLSFiles.CA), a non-verifying one for
// "skip-verify" and "preferred". Any TLS file makes the mode "true": a CA or
// a client certificate sent over an unverified connection would protect
// nothing.
func (c Config) TLS() (*tls.Config, error) {
	mode := c.Params["tls"]
	if c.TLSFiles.Set() {
		switch mode {
		case "", "false", "true":
			mode = "true"
		default:
			return nil, fmt.Errorf("--tls=%s does not verify the server, so --tls-ca, --tls-cert, --tls-key and --tls-server-name mean nothing with it: drop them or pass --tls=true", mode)
		}
	}
	switch mode {
	case "", "false":
		return nil, nil
	case "true":
		return c.TLSFiles.config(c.Host)
	case "skip-verify", "preferred":
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, nil
	default:
		return nil, fmt.Errorf("tls=%q is not one of %s: pass --tls with one of them", mode, strings.Join(TLSModes, ", "))
	}
}

// config is a verifying TLS configuration for host.
func (f TLSFiles) config(host string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if f.ServerName != "" {
		cfg.ServerName = f.ServerName
	}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key != "":
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("a client certificate needs both --tls-cert and --tls-key")
	}
	return cfg, nil
}
