// Stub put in place of pkg/plugins/scorer/precise_prefix_cache.go (through `go build -overlay`) by
// scripts/consumers: the real file imports github.com/llm-d/llm-d-kv-cache, which the Go module proxy
// does not serve at any version, so the EPP cannot be built with it here. The type stays registered so
// a config naming it still finds it in the registry; creating it fails, saying why. The render never
// uses it, and the corpus of tests/consumers does not either.
package scorer

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
)

// PrecisePrefixCachePluginType is the type-name of the PrecisePrefixCacheScorer plugin.
const PrecisePrefixCachePluginType = "precise-prefix-cache-scorer"

// PrecisePrefixCachePluginFactory refuses: this build has no llm-d-kv-cache.
func PrecisePrefixCachePluginFactory(name string, _ json.RawMessage, _ plugin.Handle) (plugin.Plugin, error) {
	return nil, fmt.Errorf("plugin '%s' (type %s) is not in this build: it needs llm-d-kv-cache, not served by the module proxy",
		name, PrecisePrefixCachePluginType)
}
