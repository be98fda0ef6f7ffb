// The hook kit: the request and answer types, the children-map key helper, and the plumbing
// that runs a hook once per call (exec) or serves it over HTTP (webhook). Standard library only.
//
//	bin/hook                       exec: one call; the request JSON on stdin, the hook's name
//	                               in KUBECTL_META_HOOK, the answer on stdout
//	bin/hook --serve [HOST:]PORT   webhook: POST /<hook>, GET /healthz (127.0.0.1 by default)
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strings"
)

// Object is any Kubernetes object, as JSON.
type Object = map[string]any

// ObjectMap holds observed objects by type, then by name: {"ConfigMap.v1": {"sample": {...}}}.
// Every declared type is present, even with nothing observed. Look a type up with childKey,
// never by hand.
type ObjectMap = map[string]map[string]Object

// SyncRequest is a CompositeController sync: the parent and its children as observed.
type SyncRequest struct {
	Controller Object    `json:"controller"`
	Parent     Object    `json:"parent"`
	Children   ObjectMap `json:"children"`
	Related    ObjectMap `json:"related"`
	Finalizing bool      `json:"finalizing"`
}

// SyncResponse is its answer: the parent's status and every child it should have.
type SyncResponse struct {
	Status             Object   `json:"status"`
	Children           []Object `json:"children"`
	ResyncAfterSeconds float64  `json:"resyncAfterSeconds,omitempty"`
	Finalized          bool     `json:"finalized,omitempty"`
}

// DecoratorRequest is a DecoratorController sync: the target object and its attachments.
type DecoratorRequest struct {
	Controller  Object    `json:"controller"`
	Object      Object    `json:"object"`
	Attachments ObjectMap `json:"attachments"`
	Related     ObjectMap `json:"related"`
	Finalizing  bool      `json:"finalizing"`
}

// DecoratorResponse is its answer: labels and annotations merged into the target, its status
// (nil: leave it alone), every attachment it should have.
type DecoratorResponse struct {
	Labels             map[string]string `json:"labels,omitempty"`
	Annotations        map[string]string `json:"annotations,omitempty"`
	Status             Object            `json:"status"`
	Attachments        []Object          `json:"attachments"`
	ResyncAfterSeconds float64           `json:"resyncAfterSeconds,omitempty"`
	Finalized          bool              `json:"finalized,omitempty"`
}

// MapRequest is a MapController map call: one input object and the outputs made from it.
type MapRequest struct {
	Controller Object    `json:"controller"`
	Parent     Object    `json:"parent"`
	MapKey     string    `json:"mapKey"`
	Input      Object    `json:"input"`
	Outputs    ObjectMap `json:"outputs"`
}

// MapResponse is its answer: every output this input should have.
type MapResponse struct {
	Outputs            []Object `json:"outputs"`
	ResyncAfterSeconds float64  `json:"resyncAfterSeconds,omitempty"`
}

// childKey is the key of a type in a request's object maps: Kind.version for the core group
// (ConfigMap.v1), Kind.group/version otherwise (Deployment.apps/v1).
func childKey(kind, apiVersion string) string {
	return kind + "." + apiVersion
}

// nameOf is an object's metadata.name.
func nameOf(o Object) string {
	meta, _ := o["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

// specOf is an object's spec (nil when it has none).
func specOf(o Object) Object {
	spec, _ := o["spec"].(map[string]any)
	return spec
}

// stringFields is the string-valued fields of a spec (e.g. as a ConfigMap's data).
func stringFields(spec Object) map[string]any {
	out := map[string]any{}
	for k, v := range spec {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// Handler answers one request body.
type Handler func(body []byte) (any, error)

// hook adapts a typed hook function to a Handler.
func hook[Req any, Resp any](f func(Req) Resp) Handler {
	return func(body []byte) (any, error) {
		var request Req
		if err := json.Unmarshal(body, &request); err != nil {
			return nil, fmt.Errorf("the request is not valid JSON for this hook: %w", err)
		}
		return f(request), nil
	}
}

// run serves the hooks (--serve [HOST:]PORT) or answers one exec call.
func run(hooks map[string]Handler) {
	if len(os.Args) == 3 && os.Args[1] == "--serve" {
		serve(hooks, os.Args[2])
		return
	}
	name := os.Getenv("KUBECTL_META_HOOK")
	h, ok := hooks[name]
	if !ok {
		fail(fmt.Errorf("KUBECTL_META_HOOK=%q is not one of: %s", name, names(hooks)))
	}
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	answer, err := h(body)
	if err != nil {
		fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(answer); err != nil {
		fail(err)
	}
}

// fail reports on stderr and exits 1: the sync fails and nothing is changed.
func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func names(hooks map[string]Handler) string {
	var n []string
	for k := range hooks {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// serve answers POST /<hook> and GET /healthz.
func serve(hooks map[string]Handler, address string) {
	if !strings.Contains(address, ":") {
		address = "127.0.0.1:" + address
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h, ok := hooks[strings.Trim(r.URL.Path, "/")]
		if !ok || r.Method != http.MethodPost {
			http.Error(w, "no hook at "+r.Method+" "+r.URL.Path+" (hooks: "+names(hooks)+")", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		var answer any
		if err == nil {
			answer, err = h(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
		log.Printf("POST %s 200", r.URL.Path)
	})
	log.Printf("hooks listening on http://%s (POST /%s, GET /healthz)", address, names(hooks))
	log.Fatal(http.ListenAndServe(address, nil))
}
