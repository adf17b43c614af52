// argo-render: a template of a WorkflowTemplate rendered into a pod spec by Argo Workflows' own code.
//
// The workflow controller makes a pod from a template in three steps, each done here by the same
// function of the pinned module: ProcessArgs puts the arguments and the workflow's parameters into
// the template (workflow/controller/operator.go, executeTemplate), ProcessArgs again on the
// podSpecPatch alone (workflowpod.go, processPodSpecPatch), and ApplyPodSpecPatch merges that patch
// into the pod spec (createWorkflowPod). tests/workflows/test_argo_render.py feeds it hostile values.
//
// A template with a retryStrategy gets the attempt's number as `retries` ("0" unless the request
// names another), as executeTemplate injects it before ProcessArgs.
//
// stdin:  {"template": <Template>, "arguments": {"name": "value"}, "globals": {"workflow.parameters.x": "v"},
//          "retries": "1"}
// stdout: {"template": <the substituted Template>, "pod": <PodSpec>} or {"error": "..."}
package main

import (
	"encoding/json"
	"fmt"
	"os"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/common"
	"github.com/argoproj/argo-workflows/v3/workflow/util"
	apiv1 "k8s.io/api/core/v1"
)

type request struct {
	Template  wfv1.Template     `json:"template"`
	Arguments map[string]string `json:"arguments"`
	Globals   map[string]string `json:"globals"`
	Retries   string            `json:"retries"`
}

type answer struct {
	Template *wfv1.Template `json:"template,omitempty"`
	Pod      *apiv1.PodSpec `json:"pod,omitempty"`
	Error    string         `json:"error,omitempty"`
}

func render(req request) (*wfv1.Template, *apiv1.PodSpec, error) {
	args := wfv1.Arguments{}
	for name, value := range req.Arguments {
		args.Parameters = append(args.Parameters, wfv1.Parameter{Name: name, Value: wfv1.AnyStringPtr(value)})
	}
	globals := common.Parameters(req.Globals)
	local := common.Parameters{common.LocalVarPodName: "pod"}
	if req.Template.RetryStrategy != nil {
		local[common.LocalVarRetries] = "0"
		if req.Retries != "" {
			local[common.LocalVarRetries] = req.Retries
		}
	}
	tmpl, err := common.ProcessArgs(&req.Template, &args, globals, local, false, "ns", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("template: %w", err)
	}
	spec := apiv1.PodSpec{InitContainers: []apiv1.Container{{Name: "init"}}}
	if tmpl.Container != nil {
		main := *tmpl.Container.DeepCopy()
		main.Name = "main"
		spec.Containers = []apiv1.Container{main}
	}
	spec.Volumes = tmpl.Volumes
	spec.NodeSelector = tmpl.NodeSelector
	spec.SecurityContext = tmpl.SecurityContext
	if tmpl.HasPodSpecPatch() {
		patchTmpl := tmpl.DeepCopy()
		processed, err := common.ProcessArgs(patchTmpl, &wfv1.Arguments{}, globals, local, false, "ns", nil)
		if err != nil {
			return tmpl, nil, fmt.Errorf("podSpecPatch: %w", err)
		}
		patched, err := util.ApplyPodSpecPatch(spec, processed.PodSpecPatch)
		if err != nil {
			return tmpl, nil, fmt.Errorf("podSpecPatch: %w", err)
		}
		spec = *patched
	}
	return tmpl, &spec, nil
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "argo-render: stdin:", err)
		os.Exit(2)
	}
	tmpl, pod, err := render(req)
	out := answer{Template: tmpl, Pod: pod}
	if err != nil {
		out = answer{Template: tmpl, Error: err.Error()}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
