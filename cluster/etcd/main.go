// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3/etcdmain), built as a
// standalone main package for the local cluster (see scripts/cluster build).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
