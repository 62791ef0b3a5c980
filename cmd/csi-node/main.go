// Command csi-node is cellfleet's CSI node binary. Subcommands:
//
//	csi-node plugin --driver=local.storage.eric.dev|replicated.storage.eric.dev ...   (docs/csi.md)
//	csi-node mount-owner ...                                                          (docs/fuse.md)
//	csi-node mount ...                                                                (development)
package main

import (
	"fmt"
	"os"
)

const usage = `usage: csi-node <subcommand> [flags]

subcommands:
  plugin        serve a CSI driver (Identity, Node and, for local.storage.eric.dev, Controller)
  mount-owner   hold the node's FUSE sessions of replicated volumes (docs/fuse.md)
  mount         development: mount a volume in the foreground from a client.json
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "plugin":
		err = runPlugin(os.Args[2:])
	case "mount-owner":
		err = runMountOwner(os.Args[2:])
	case "mount":
		err = runDevMount(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "csi-node: unknown subcommand %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "csi-node:", err)
		os.Exit(1)
	}
}
