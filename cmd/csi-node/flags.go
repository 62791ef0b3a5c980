package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// pluginFlags are the validated flags of `csi-node plugin`.
type pluginFlags struct {
	driver         string
	endpoint       string
	nodeID         string
	dataRoot       string
	stateDir       string
	consumerRoot   string
	kubeletDir     string
	mountOwner     string
	metricsAddress string
	logLevel       slog.Level
	extraPathRoots []string
	// registrationDir is the kubelet's plugin registration directory;
	// empty: the plugin does not register (standalone mode, tests).
	registrationDir string
	// kubeletRegistrationPath is the CSI socket as the kubelet sees it.
	kubeletRegistrationPath string
}

// nodeIDPattern: the node ID is a topology label value, so it must be one.
var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

func parsePluginFlags(args []string, stderr io.Writer) (*pluginFlags, error) {
	fs := flag.NewFlagSet("csi-node plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &pluginFlags{}
	var logLevel, extraRoots string
	fs.StringVar(&f.driver, "driver", "", "CSI driver to serve: "+local.DriverName+" or "+replicated.DriverName)
	fs.StringVar(&f.endpoint, "endpoint", "unix:///csi/csi.sock", "unix socket to serve CSI on")
	fs.StringVar(&f.nodeID, "node-id", "", "this node's name (the topology value of local volumes)")
	fs.StringVar(&f.dataRoot, "data-root", "", "directory holding local volumes (local driver)")
	fs.StringVar(&f.stateDir, "state-dir", "", "private persistent state directory of this plugin")
	fs.StringVar(&f.consumerRoot, "consumer-mount-root", "", "directory beneath which publication is exclusive (local driver); empty disables")
	fs.StringVar(&f.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "kubelet's root: target and staging paths must lie beneath it")
	fs.StringVar(&extraRoots, "allowed-path-roots", "", "comma-separated extra roots for target and staging paths")
	fs.StringVar(&f.mountOwner, "mount-owner-socket", "/run/cellfleet/mount-owner.sock", "unix socket of the FUSE mount owner (replicated driver)")
	fs.StringVar(&f.metricsAddress, "metrics-address", "", "host:port serving /metrics and /healthz; empty disables")
	fs.StringVar(&f.registrationDir, "plugin-registration-dir", "", "kubelet's plugin registration directory (<kubelet root>/plugins_registry): serve <driver>-reg.sock there so the kubelet registers the driver; empty: do not register")
	fs.StringVar(&f.kubeletRegistrationPath, "kubelet-registration-path", "", "the CSI socket's path on the host, announced to the kubelet (default <kubelet-dir>/plugins/<driver>/csi.sock)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := f.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level=%q: %w", logLevel, err)
	}
	if extraRoots != "" {
		f.extraPathRoots = strings.Split(extraRoots, ",")
	}
	if f.kubeletRegistrationPath == "" && f.driver != "" {
		f.kubeletRegistrationPath = filepath.Join(f.kubeletDir, "plugins", f.driver, "csi.sock")
	}
	return f, f.validate()
}

func absClean(flagName, p string, required bool) error {
	if p == "" {
		if required {
			return fmt.Errorf("--%s is required", flagName)
		}
		return nil
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("--%s=%q must be a clean absolute path", flagName, p)
	}
	return nil
}

func (f *pluginFlags) validate() error {
	var errs []error
	switch f.driver {
	case local.DriverName, replicated.DriverName:
	default:
		errs = append(errs, fmt.Errorf("--driver=%q: must be %s or %s", f.driver, local.DriverName, replicated.DriverName))
	}
	if !nodeIDPattern.MatchString(f.nodeID) {
		errs = append(errs, fmt.Errorf("--node-id=%q: must be a label value (1-63 alphanumerics, '-', '_', '.')", f.nodeID))
	}
	isLocal := f.driver == local.DriverName
	errs = append(errs,
		absClean("state-dir", f.stateDir, true),
		absClean("data-root", f.dataRoot, isLocal),
		absClean("consumer-mount-root", f.consumerRoot, false),
		absClean("kubelet-dir", f.kubeletDir, true),
		absClean("mount-owner-socket", f.mountOwner, !isLocal),
		absClean("plugin-registration-dir", f.registrationDir, false),
		absClean("kubelet-registration-path", f.kubeletRegistrationPath, f.registrationDir != ""))
	for _, r := range f.extraPathRoots {
		errs = append(errs, absClean("allowed-path-roots", r, true))
	}
	if !isLocal && f.consumerRoot != "" {
		errs = append(errs, errors.New("--consumer-mount-root applies to "+local.DriverName+" only"))
	}
	if f.consumerRoot != "" && f.dataRoot != "" && (f.consumerRoot == f.dataRoot ||
		strings.HasPrefix(f.consumerRoot, f.dataRoot+"/") || strings.HasPrefix(f.dataRoot, f.consumerRoot+"/")) {
		errs = append(errs, fmt.Errorf("--consumer-mount-root=%s and --data-root=%s must not contain each other", f.consumerRoot, f.dataRoot))
	}
	return errors.Join(errs...)
}
