package server

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Identity is the CSI Identity service of one driver.
type Identity struct {
	csi.UnimplementedIdentityServer

	Name    string // CSI driver name, e.g. local.storage.eric.dev
	Version string
	// Controller says the driver serves the Controller service.
	Controller bool
	// Topology says volumes are reachable from a subset of nodes only.
	Topology bool
	// OnlineExpansion says a published volume can be expanded (with the
	// Controller's EXPAND_VOLUME capability).
	OnlineExpansion bool
	// Ready reports whether the driver can serve (nil error: ready).
	Ready func() error
}

// GetPluginInfo returns the driver name and version.
func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	if i.Name == "" {
		return nil, status.Error(codes.Unavailable, "driver name not configured")
	}
	return &csi.GetPluginInfoResponse{Name: i.Name, VendorVersion: i.Version}, nil
}

// GetPluginCapabilities lists the Controller service, topology and online
// expansion support.
func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	service := func(t csi.PluginCapability_Service_Type) {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: t}}})
	}
	if i.Controller {
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE)
	}
	if i.Topology {
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	}
	if i.OnlineExpansion {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
			VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}})
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe answers ready unless the driver's readiness check fails.
func (i *Identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if i.Ready != nil {
		if err := i.Ready(); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "not ready: %v", err)
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
