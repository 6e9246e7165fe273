// Wrapper module for the etcd server binary: `go install go.etcd.io/etcd/server/v3@…` is refused
// because etcd's server/go.mod has replace directives. scripts/cluster builds this module in a
// scratch copy (its go.sum is generated there, never committed).
module rebel100.local/cluster/etcd

go 1.26

require go.etcd.io/etcd/server/v3 v3.6.16
