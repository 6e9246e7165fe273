// Stub put in place of pkg/plugins/preparedata/tokenizer.go (through `go build -overlay`, which also drops
// tokenizer_scorer.go, the plugin's methods) by scripts/consumers: the real file imports
// github.com/llm-d/llm-d-kv-cache, which the Go module proxy does not serve, so the EPP cannot be built
// with it here. The names other packages use stay; creating the plugin fails, saying why. The render
// never uses it, and the corpus of tests/consumers does not either.
package preparedata

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
)

const (
	// TokenizerPluginType is the type name used to register the tokenizer plugin.
	TokenizerPluginType = "tokenizer"
	// TokenizedPromptKey is the data key the tokenizer plugin produces.
	TokenizedPromptKey = "TokenizedPrompt"
	// TokenizedPromptStateKey is the CycleState key of the tokenized prompt.
	TokenizedPromptStateKey = plugin.StateKey(TokenizerPluginType + "." + TokenizedPromptKey)
)

// TokenizedPromptState is read by the context-length-aware plugin; nothing writes it in this build.
type TokenizedPromptState struct {
	TokenIDs []uint32
}

// Clone implements plugin.StateData.
func (t *TokenizedPromptState) Clone() plugin.StateData {
	if t == nil {
		return nil
	}
	return &TokenizedPromptState{TokenIDs: append([]uint32(nil), t.TokenIDs...)}
}

// TokenizerPluginFactory refuses: this build has no llm-d-kv-cache.
func TokenizerPluginFactory(name string, _ json.RawMessage, _ plugin.Handle) (plugin.Plugin, error) {
	return nil, fmt.Errorf("plugin '%s' (type %s) is not in this build: it needs llm-d-kv-cache, not served by the module proxy",
		name, TokenizerPluginType)
}
