package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Paths of the protocol.
const (
	PathMount    = "/v1/mount"
	PathUnmount  = "/v1/unmount"
	PathSessions = "/v1/sessions"
)

// Client talks to a mount owner over its unix socket. Its calls only ask:
// a caller killed in the middle of one never affects a mount.
type Client struct {
	http *http.Client
}

// NewClient returns a client of the owner listening at socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}
	return &Client{http: &http.Client{Transport: tr}}
}

// Mount mounts a volume (idempotent: the same volume at the same target
// answers the existing session).
func (c *Client) Mount(ctx context.Context, req MountRequest) (Session, error) {
	var s Session
	if err := req.Validate(); err != nil {
		return s, &Error{Code: CodeInvalidArgument, Message: err.Error()}
	}
	err := c.call(ctx, http.MethodPost, PathMount, req, &s)
	return s, err
}

// Unmount unmounts a session named by volume ID or, when ref is an absolute
// path, by target. Unmounting what is not mounted succeeds.
func (c *Client) Unmount(ctx context.Context, ref string) error {
	req := UnmountRequest{VolumeID: ref}
	if strings.HasPrefix(ref, "/") {
		req = UnmountRequest{Target: ref}
	}
	if err := req.Validate(); err != nil {
		return &Error{Code: CodeInvalidArgument, Message: err.Error()}
	}
	return c.call(ctx, http.MethodPost, PathUnmount, req, &struct{}{})
}

// List returns every session the owner knows, lost ones included.
func (c *Client) List(ctx context.Context) ([]Session, error) {
	var l ListResponse
	err := c.call(ctx, http.MethodGet, PathSessions, nil, &l)
	return l.Sessions, err
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://mount-owner"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("mount owner %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("mount owner %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{}
		if json.Unmarshal(data, e) != nil || e.Code == "" {
			return &Error{Code: CodeInternal, Message: fmt.Sprintf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, data)}
		}
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("mount owner %s %s: decode answer: %w", method, path, err)
	}
	return nil
}
