package controller

import (
	"context"
	"log/slog"

	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

// Server serves the Identity and Controller services of the replicated
// driver on a unix socket; it is a controller-runtime Runnable of the
// manager. It runs on every manager replica, leader or not: it holds no
// state, and the csi-provisioner sidecar beside each replica elects which
// one calls it.
type Server struct {
	Socket     string // absolute path of the unix socket the sidecars share
	Controller *Controller
	Metrics    *server.Metrics // nil: no RPC metrics
	Version    string
	Log        *slog.Logger
}

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	return server.Serve(ctx, log, s.Socket, server.Services{
		Identity:   &server.Identity{Name: replicated.DriverName, Version: s.Version, Controller: true, OnlineExpansion: true},
		Controller: s.Controller,
	}, s.Metrics)
}

// NeedLeaderElection is false: see Server.
func (s *Server) NeedLeaderElection() bool { return false }
