// Command coredns is a minimal CoreDNS for the local test cluster: only the
// plugins that cluster DNS for Services and StatefulSet Pods needs. It is its
// own module (built with GOWORK=off) so CoreDNS's dependencies stay out of the
// project's modules.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the plugin order CoreDNS runs a query through; it must list
// exactly the plugins imported above.
var directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes", "loop", "forward"}

func init() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		panic(err)
	}
}

func main() { coremain.Run() }
