module rebel100.local/parsers

go 1.24.0

require (
	github.com/distribution/reference v0.6.0
	github.com/prometheus/common v0.67.5
)

require (
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
