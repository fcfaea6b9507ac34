#!/usr/bin/env node
// The npm packages tested as a user would use them: packs them (npm/build.mjs), installs the
// tarballs into a fresh temporary project, compiles the tests and the README's examples there
// with tsc --strict, and runs them with Node's own test runner against the installed package
// and its binary. A second project installed with --omit=optional checks the repair message.
//
//   node npm/quietus/test/run.mjs [--binary PATH] [--keep]
//
//   --binary PATH  the binary to pack (default target/release/quietus; CI: target/debug/quietus)
//   --keep         keep the temporary projects (their path is printed)

import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const packageDir = path.dirname(here);
const repo = path.resolve(packageDir, "..", "..");

const args = process.argv.slice(2);
let binary = null;
let keep = false;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--binary") binary = path.resolve(args[++i] ?? "");
  else if (args[i] === "--keep") keep = true;
  else {
    process.stderr.write(`run.mjs: unknown argument ${args[i]}\n`);
    process.exit(2);
  }
}

function sh(cmd, argv, cwd, extra = {}) {
  process.stderr.write(`== ${cmd} ${argv.join(" ")}\n`);
  execFileSync(cmd, argv, { cwd, stdio: "inherit", ...extra });
}

const typescript = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")).devDependencies;
const root = fs.mkdtempSync(path.join(os.tmpdir(), "quietus-npm-test-"));
let status = 1;
try {
  // The types are what the schema gives, and the generator's own tests pass.
  sh(process.execPath, ["--test", path.join(here, "gen-types.test.mjs")], packageDir);

  const packs = path.join(root, "packs");
  const build = [path.join(repo, "npm", "build.mjs"), "--out", packs, "--strip"];
  if (binary) build.push("--binary", binary);
  sh(process.execPath, build, repo);
  // Finding the binary, on the compiled package (dist/ of the build).
  sh(process.execPath, ["--test", path.join(here, "platform.test.mjs")], packageDir);
  const tarballs = fs.readdirSync(packs).filter((f) => f.endsWith(".tgz"));
  const main = tarballs.find((f) => /^quietus-\d/.test(f));
  const platform = tarballs.find((f) => /^quietus-linux-x64-gnu-/.test(f));
  if (!main || !platform) throw new Error(`missing tarballs in ${packs}: ${tarballs.join(", ")}`);

  // The project a user makes.
  const project = path.join(root, "project");
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "quietus-user", version: "1.0.0", private: true }, null, 2));
  sh("npm", ["install", "--no-audit", "--no-fund", path.join(packs, main), path.join(packs, platform),
    `typescript@${typescript.typescript}`, `@types/node@${typescript["@types/node"]}`], project);

  // A project whose install left the optional dependencies out.
  const omitted = path.join(root, "omitted");
  fs.mkdirSync(omitted);
  fs.writeFileSync(path.join(omitted, "package.json"), JSON.stringify({ name: "quietus-omitted", version: "1.0.0", private: true }, null, 2));
  sh("npm", ["install", "--no-audit", "--no-fund", "--omit=optional", path.join(packs, main)], omitted);
  if (fs.existsSync(path.join(omitted, "node_modules", "@quietus"))) throw new Error("--omit=optional installed a platform package");

  // The tests, and the README's TypeScript examples, compiled there with tsc --strict.
  const tests = path.join(project, "test");
  fs.mkdirSync(tests);
  for (const f of fs.readdirSync(path.join(here, "installed"))) fs.copyFileSync(path.join(here, "installed", f), path.join(tests, f));
  // The schema the types are generated from: the client suite checks every message against it.
  const checkTypes = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")).scripts["check-types"].split(/\s+/);
  fs.copyFileSync(path.resolve(packageDir, checkTypes[checkTypes.length - 1]), path.join(tests, "schema.json"));
  const examples = path.join(project, "examples");
  fs.mkdirSync(examples);
  // The README as installed: what users read.
  const readme = fs.readFileSync(path.join(project, "node_modules", "quietus", "README.md"), "utf8");
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  blocks.forEach((code, i) => fs.writeFileSync(path.join(examples, `readme-${i + 1}.mts`), code));
  // The main README's TypeScript examples are type-checked too (not run: they run `npm test`).
  const mainReadme = fs.readFileSync(path.join(repo, "README.md"), "utf8");
  [...mainReadme.matchAll(/```ts\n([\s\S]*?)```/g)].forEach((m, i) =>
    fs.writeFileSync(path.join(examples, `main-readme-${i + 1}.mts`), `${m[1]}\nexport {};\n`));
  fs.writeFileSync(path.join(project, "tsconfig.json"), JSON.stringify({
    compilerOptions: {
      target: "ES2022", module: "nodenext", moduleResolution: "nodenext", strict: true,
      noUncheckedIndexedAccess: true, types: ["node"], outDir: "build", rootDir: ".", skipLibCheck: false,
    },
    include: ["test/*.mts", "examples/*.mts"],
  }, null, 2));
  sh(process.execPath, [path.join(project, "node_modules", "typescript", "bin", "tsc"), "-p", "."], project);

  const testFiles = fs.readdirSync(path.join(project, "build", "test")).filter((f) => f.endsWith(".test.mjs")).map((f) => path.join("build", "test", f));
  // One file at a time (where Node knows the flag): the tests count processes by marker, and
  // the machine may have 2 cores.
  const [major, minor] = process.versions.node.split(".").map(Number);
  const serial = major > 20 || (major === 20 && minor >= 10) ? ["--test-concurrency=1"] : [];
  sh(process.execPath, ["--test", ...serial, ...testFiles], project, {
    env: { ...process.env, QUIETUS_TEST_OMITTED_PROJECT: omitted, QUIETUS_BINARY_PATH: "" },
  });
  status = 0;
} catch (e) {
  process.stderr.write(`run.mjs: ${e.message}\n`);
} finally {
  if (keep) process.stderr.write(`kept ${root}\n`);
  else fs.rmSync(root, { recursive: true, force: true });
}
process.exit(status);
