package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A miniature of the Kubernetes API document: a kind whose spec has an
// int-or-string, a quantity, a map and a field named "properties".
const miniSwagger = `{"definitions": {
  "io.k8s.api.apps.v1.Thing": {
    "description": "a kind",
    "type": "object",
    "properties": {
      "apiVersion": {"type": "string"},
      "kind": {"type": "string"},
      "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.ThingSpec"}
    },
    "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Thing", "version": "v1"}]
  },
  "io.k8s.api.apps.v1.ThingSpec": {
    "type": "object",
    "properties": {
      "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
      "memory": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
      "labels": {"type": "object", "additionalProperties": {"type": "string"}},
      "properties": {"type": "object", "properties": {"format": {"type": "string"}}}
    }
  },
  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
  "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
  "io.k8s.api.core.v1.Unused": {"type": "object", "properties": {"x": {"type": "string"}},
    "x-kubernetes-group-version-kind": [{"group": "", "kind": "Unused", "version": "v1"}]}
}}`

func generate(t *testing.T, swagger string) (string, int, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "swagger.json")
	if err := os.WriteFile(path, []byte(swagger), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "schemas")
	n, err := run(path, out)
	return out, n, err
}

// The schemas kubeconform picks by name are strict: unknown fields are
// refused at every level, the kind's top level included, and the types
// that accept two JSON types accept both.
func TestSchemasAreStrictAndNamedAsKubeconformLooksThemUp(t *testing.T) {
	out, n, err := generate(t, miniSwagger)
	if err != nil || n != 2 {
		t.Fatalf("run = %d, %v; want 2 schemas", n, err)
	}
	if _, err := os.Stat(filepath.Join(out, "unused-v1.json")); err != nil {
		t.Errorf("core kind's schema: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "thing-apps-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Ref         string                    `json:"$ref"`
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	kind := schema.Definitions["io.k8s.api.apps.v1.Thing"]
	if schema.Ref != "#/definitions/io.k8s.api.apps.v1.Thing" || kind["additionalProperties"] != false {
		t.Errorf("kind: $ref %q, additionalProperties %v; want the kind, false", schema.Ref, kind["additionalProperties"])
	}
	if _, ok := kind["description"]; ok {
		t.Error("descriptions are kept")
	}
	if _, ok := schema.Definitions["io.k8s.api.core.v1.Unused"]; ok {
		t.Error("a definition the kind does not reach is included")
	}
	spec := schema.Definitions["io.k8s.api.apps.v1.ThingSpec"]
	props := spec["properties"].(map[string]any)
	if spec["additionalProperties"] != false {
		t.Error("spec allows unknown fields")
	}
	if _, ok := props["additionalProperties"]; ok {
		t.Error(`the field named "properties" made the properties map a schema`)
	}
	field := props["properties"].(map[string]any)
	if field["additionalProperties"] != false {
		t.Error(`the field named "properties" allows unknown fields`)
	}
	if _, ok := props["labels"].(map[string]any)["additionalProperties"].(map[string]any); !ok {
		t.Error("a map lost its value schema")
	}
	oneOf := func(types ...string) map[string]any {
		var alts []any
		for _, typ := range types {
			alts = append(alts, map[string]any{"type": typ})
		}
		return map[string]any{"oneOf": alts}
	}
	intOrString := schema.Definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
	if !reflect.DeepEqual(intOrString, oneOf("string", "integer")) {
		t.Errorf("int-or-string = %v", intOrString)
	}
	quantity := schema.Definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"]
	if !reflect.DeepEqual(quantity, oneOf("string", "number")) {
		t.Errorf("quantity = %v", quantity)
	}
}

// A document that is not the API's is refused with a reason, not turned
// into no schemas at all (which would make every kind unknown).
func TestRefusesADocumentWithoutKinds(t *testing.T) {
	for name, doc := range map[string]string{
		"not JSON":       `{"definitions": `,
		"no definitions": `{"swagger": "2.0"}`,
		"no kinds":       `{"definitions": {"a": {"type": "object"}}}`,
	} {
		if _, n, err := generate(t, doc); err == nil {
			t.Errorf("%s: run wrote %d schemas, want an error", name, n)
		}
	}
}

// Whatever the document, run returns an error or writes schemas that are JSON.
func FuzzRun(f *testing.F) {
	f.Add(miniSwagger)
	f.Add(`{"definitions": {"a": {"x-kubernetes-group-version-kind": [{"kind": "A", "version": "v1"}], "$ref": "#/definitions/a"}}}`)
	f.Add(`{"definitions": {"a": {"x-kubernetes-group-version-kind": "A"}}}`)
	f.Add(`{"definitions": {"a": {"x-kubernetes-group-version-kind": [{"kind": "../../a", "version": "v1"}]}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		out, n, err := generate(t, doc)
		if err != nil {
			return
		}
		entries, _ := os.ReadDir(out)
		if n == 0 || len(entries) == 0 {
			t.Fatalf("run = %d, nil with %d files", n, len(entries))
		}
		for _, e := range entries {
			raw, err := os.ReadFile(filepath.Join(out, e.Name()))
			if err != nil || !json.Valid(raw) {
				t.Fatalf("%s: %v, valid JSON %v", e.Name(), err, json.Valid(raw))
			}
		}
	})
}
