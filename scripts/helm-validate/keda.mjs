// Validates KEDA objects against KEDA's CRD schemas, offline: the npm package
// @kubernetes-models/keda (pinned in package.json beside this file) carries them, compiled to
// validation functions from KEDA's CRDs. Called by validate.py, not by hand.
//
// Usage: node keda.mjs NODE_MODULES_DIR < objects.json
//   stdin: a JSON array of objects; stdout: a JSON array, one entry per object in order, null
//   when valid or the validation error's message.
//
// The models are imported by file path, so this file need not sit beside node_modules.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
if (!modules) {
  console.error("usage: node keda.mjs NODE_MODULES_DIR < objects.json");
  process.exit(2);
}

// The kinds the chart may render, by apiVersion and kind.
const KINDS = {
  "keda.sh/v1alpha1": ["ScaledObject", "TriggerAuthentication"],
};

async function model(apiVersion, kind) {
  if (!(KINDS[apiVersion] || []).includes(kind)) {
    return null;
  }
  const group = apiVersion.split("/")[0];
  const version = apiVersion.split("/")[1];
  const file = join(modules, "@kubernetes-models/keda", group, version, `${kind}.js`);
  return (await import(pathToFileURL(file).href))[kind];
}

const objects = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const object of objects) {
  const Model = await model(object.apiVersion, object.kind);
  if (!Model) {
    results.push(`no KEDA schema for ${object.apiVersion} ${object.kind}`);
    continue;
  }
  try {
    new Model(object).validate();
    results.push(null);
  } catch (e) {
    results.push(String(e.message || e));
  }
}
process.stdout.write(JSON.stringify(results));
