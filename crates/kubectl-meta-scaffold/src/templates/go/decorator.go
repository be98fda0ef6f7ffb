// The sync hook of DecoratorController {{CONTROLLER}}: for one {{PARENT_KIND}} (the target), the
// labels to add and the attachments it should have. kit.go has the request and answer types;
// the hook contract (every field, the attachments keys, the defaults) is in kubectl-meta's docs.
package main

func sync(request DecoratorRequest) DecoratorResponse {
	name := nameOf(request.Object)
{{SPEC_DECL}}	// Desired attachments: the engine creates, updates or deletes objects to match this list.
	attachments := []Object{
{{CHILDREN}}
	}
	// The status reports what was observed, not what is about to be created.
{{STATUS}}
	labels := map[string]string{"{{DECORATED_LABEL}}": "true"}
	return DecoratorResponse{Labels: labels, Attachments: attachments, Status: status}
}

func main() {
	run(map[string]Handler{"sync": hook(sync)})
}
