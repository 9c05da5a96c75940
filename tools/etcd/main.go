// Command etcd is etcd's own server main (go.etcd.io/etcd/server/v3/etcdmain), built from its Go
// module so the real control plane needs no downloaded release binary. It is a separate module from
// tools/kube so minimal version selection cannot raise the dependencies Kubernetes pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
