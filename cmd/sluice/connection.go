package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// tableConnection is connection for the commands that name a table: it
// refuses --password and requires --database and --table.
func tableConnection(c *cobra.Command, f migrateFlags) (dbconn.Config, string, error) {
	if c.Flags().Changed("password") {
		return dbconn.Config{}, "", errPasswordFlag
	}
	conn, database, err := connection(c, f)
	switch {
	case err != nil:
		return conn, "", err
	case database == "":
		return conn, "", errors.New("no database given: pass --database")
	case f.table == "":
		return conn, "", errors.New("no table given: pass --table")
	}
	return conn, database, nil
}

// connection resolves where to connect and as whom, with the password from a
// file, the environment or an option file.
func connection(c *cobra.Command, f migrateFlags) (dbconn.Config, string, error) {
	conn := dbconn.Config{Host: f.host, Port: f.port, User: f.user}
	database := f.database
	if f.defaultsFile != "" {
		opts, err := readOptionFile(f.defaultsFile)
		if err != nil {
			return conn, "", err
		}
		if v, ok := opts["user"]; ok && !c.Flags().Changed("user") {
			conn.User = v
		}
		if v, ok := opts["host"]; ok && !c.Flags().Changed("host") {
			conn.Host = v
		}
		if v, ok := opts["port"]; ok && !c.Flags().Changed("port") {
			if _, err := fmt.Sscanf(v, "%d", &conn.Port); err != nil {
				return conn, "", fmt.Errorf("option file %s: port %q is not a number", f.defaultsFile, v)
			}
		}
		if v, ok := opts["password"]; ok {
			if err := private("--defaults-file", f.defaultsFile); err != nil {
				return conn, "", err
			}
			conn.Password = v
		}
		for key, to := range map[string]*string{"ssl_ca": &conn.TLSFiles.CA, "ssl_cert": &conn.TLSFiles.Cert, "ssl_key": &conn.TLSFiles.Key} {
			if v, ok := opts[key]; ok {
				*to = v
			}
		}
		if v, ok := opts["database"]; ok && database == "" {
			database = v
		}
	}
	if f.dsn != "" {
		dc, db, err := dbconn.ParseDSN(f.dsn)
		if err != nil {
			return conn, "", fmt.Errorf("--dsn: %v", err)
		}
		if dc.Password != "" {
			return conn, "", errors.New("--dsn holds a password, which would be visible in the process list: remove it and use MYSQL_PWD, --password-file or --defaults-file")
		}
		dc.Password = conn.Password
		conn = dc
		if db != "" {
			database = db
		}
	}
	if p, ok := os.LookupEnv("MYSQL_PWD"); ok {
		conn.Password = p
	}
	if f.passwordFile != "" {
		if err := private("--password-file", f.passwordFile); err != nil {
			return conn, "", err
		}
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return conn, "", fmt.Errorf("--password-file: %v", err)
		}
		conn.Password, _, _ = strings.Cut(string(b), "\n")
		conn.Password = strings.TrimRight(conn.Password, "\r")
	}
	if conn.User == "" {
		conn.User = os.Getenv("USER")
	}
	for flag, to := range map[string]*string{"tls-ca": &conn.TLSFiles.CA, "tls-cert": &conn.TLSFiles.Cert,
		"tls-key": &conn.TLSFiles.Key, "tls-server-name": &conn.TLSFiles.ServerName} {
		if v := c.Flags().Lookup(flag); v != nil && v.Changed {
			*to = v.Value.String()
		}
	}
	if c.Flags().Changed("tls") || conn.Params["tls"] == "" {
		if conn.Params == nil {
			conn.Params = map[string]string{}
		}
		conn.Params["tls"] = f.tlsMode
	}
	return conn, database, nil
}

// private refuses a file holding a password that other users may read: the
// password is as good as published.
func private(flag, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %v", flag, err)
	}
	if mode := st.Mode().Perm(); mode&0o044 != 0 {
		return fmt.Errorf("%s %s holds a password and other users may read it (mode %04o): chmod 600 %s", flag, path, mode, path)
	}
	return nil
}
