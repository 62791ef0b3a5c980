package client

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// File is the on-disk client configuration that `replica-host
// init-standalone` writes (client.json): endpoints plus paths to the
// volume's CA and bearer token.
type File struct {
	Volume    string     `json:"volume"`
	Endpoints []Endpoint `json:"endpoints"`
	CAFile    string     `json:"caFile"`
	TokenFile string     `json:"tokenFile"`
}

// LoadFile reads a client configuration file into a Config.
func LoadFile(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read client config: %w", err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return Config{}, fmt.Errorf("parse client config %s: %w", path, err)
	}
	if f.Volume == "" || len(f.Endpoints) == 0 {
		return Config{}, errors.New("client config needs a volume and endpoints")
	}
	ca, err := os.ReadFile(f.CAFile)
	if err != nil {
		return Config{}, fmt.Errorf("read volume CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return Config{}, fmt.Errorf("CA file %s holds no certificate", f.CAFile)
	}
	tok, err := os.ReadFile(f.TokenFile)
	if err != nil {
		return Config{}, fmt.Errorf("read bearer token: %w", err)
	}
	return Config{Volume: f.Volume, Endpoints: f.Endpoints, RootCAs: pool, Token: strings.TrimSpace(string(tok))}, nil
}
