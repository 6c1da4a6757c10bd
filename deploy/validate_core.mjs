// Checks core Kubernetes objects (Job, Service, Deployment, ...) with npm's
// kubernetes-models: types, enums and required fields. Reads a JSON array of
// manifests on stdin; prints a JSON array of problems ({index, kind, name,
// message}), empty when all are valid. Used by deploy/validate.py.
import * as batch from "kubernetes-models/batch/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as core from "kubernetes-models/v1";

const models = {
  "batch/v1": batch,
  "apps/v1": apps,
  v1: core,
};

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const problems = [];
  JSON.parse(input).forEach((doc, index) => {
    const group = models[doc.apiVersion];
    const Model = group && group[doc.kind];
    const name = (doc.metadata && doc.metadata.name) || "?";
    if (!Model) {
      problems.push({ index, kind: doc.kind, name, message: `no core model for ${doc.apiVersion} ${doc.kind}` });
      return;
    }
    try {
      new Model(doc).validate();
    } catch (e) {
      problems.push({ index, kind: doc.kind, name, message: e.message });
    }
  });
  process.stdout.write(JSON.stringify(problems));
});
