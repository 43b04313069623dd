package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// readOptionFile reads the [client] and [sluice] sections of a MySQL option
// file (my.cnf); [sluice] wins. Values may be quoted.
func readOptionFile(path string) (map[string]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--defaults-file: %v", err)
	}
	defer fh.Close()
	client, own := map[string]string{}, map[string]string{}
	var section map[string]string
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			name := strings.ToLower(strings.Trim(line, "[] \t"))
			switch name {
			case "client":
				section = client
			case "sluice":
				section = own
			default:
				section = nil
			}
			continue
		}
		if section == nil {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue // a bare option such as "compress"
		}
		k = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "-", "_")
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		section[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--defaults-file %s: %v", path, err)
	}
	for k, v := range own {
		client[k] = v
	}
	return client, nil
}
