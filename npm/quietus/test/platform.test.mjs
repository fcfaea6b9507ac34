// Finding the binary (dist/platform.js, compiled by npm/build.mjs): which platform packages
// fit a machine, and what is said when none is there. Runs in the source tree.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

const require = createRequire(import.meta.url);
const { PLATFORMS, candidates, findBinary, packageName, missingPackageMessage, lockWithout, installedFromFile } = require("../dist/platform.js");
const { QuietusNotFound } = require("../dist/errors.js");
const pkg = require("../package.json");

const keys = (list) => list.map((p) => p.key);

test("the platforms are the package's optional dependencies, at its version", () => {
  assert.deepEqual(Object.keys(pkg.optionalDependencies).sort(), PLATFORMS.map(packageName).sort());
  for (const version of Object.values(pkg.optionalDependencies)) assert.equal(version, pkg.version);
});

test("candidates: the exact platform first; a static musl binary also serves glibc", () => {
  assert.deepEqual(keys(candidates("linux", "x64", "glibc")), ["linux-x64-gnu", "linux-x64-musl"]);
  assert.deepEqual(keys(candidates("linux", "x64", "musl")), ["linux-x64-musl"]);
  assert.deepEqual(keys(candidates("linux", "arm64", "glibc")), ["linux-arm64-gnu"]);
  assert.deepEqual(keys(candidates("linux", "arm64", "musl")), []);
  assert.deepEqual(keys(candidates("darwin", "arm64")), ["darwin-arm64"]);
  assert.deepEqual(keys(candidates("win32", "x64")), []);
});

const nothing = (request) => {
  throw Object.assign(new Error(`Cannot find module '${request}'`), { code: "MODULE_NOT_FOUND" });
};

test("a missing platform package: why, and how to repair it, in the package manager's words", () => {
  const saved = process.env.npm_config_user_agent;
  try {
    process.env.npm_config_user_agent = "pnpm/9.0.0 npm/? node/v20";
    const platform = PLATFORMS.find((p) => p.key === "linux-arm64-gnu");
    const message = missingPackageMessage(platform, undefined, null, null);
    assert.match(message, /^quietus: the quietus binary for this machine \(linux arm64 with glibc\) comes in the package @quietus\/linux-arm64-gnu, which is not installed\.\n/);
    assert.match(message, /\n {4}pnpm add @quietus\/linux-arm64-gnu@\d+\.\d+\.\d+\n/);
  } finally {
    if (saved === undefined) delete process.env.npm_config_user_agent;
    else process.env.npm_config_user_agent = saved;
  }
  if (candidates().length > 0) {
    assert.throws(() => findBinary({}, nothing), (e) => e instanceof QuietusNotFound && /which is not installed/.test(e.message) && e.platformPackage === packageName(candidates()[0]));
  }
});

test("an installed package without its binary, and QUIETUS_BINARY_PATH", () => {
  const project = fs.mkdtempSync(path.join(os.tmpdir(), "quietus-platform-"));
  const packageDir = path.join(project, "node_modules", "quietus");
  const key = candidates()[0]?.key ?? "linux-x64-gnu";
  const dir = path.join(project, "node_modules", "@quietus", key);
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.mkdirSync(packageDir, { recursive: true });
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ version: pkg.version }));
    const resolver = () => path.join(dir, "package.json");
    if (candidates().length > 0) {
      assert.throws(() => findBinary({}, resolver, packageDir), /is installed \(.*\) but its binary .*\/bin\/quietus does not exist: install it again/);
      fs.mkdirSync(path.join(dir, "bin"));
      fs.writeFileSync(path.join(dir, "bin", "quietus"), "#!/bin/sh\n", { mode: 0o644 });
      assert.throws(() => findBinary({}, resolver, packageDir), /cannot be executed/);
      fs.chmodSync(path.join(dir, "bin", "quietus"), 0o755);
      assert.equal(findBinary({}, resolver, packageDir), path.join(dir, "bin", "quietus"));
      // Another version beside it is not ours either.
      fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ version: "0.0.1" }));
      assert.throws(() => findBinary({}, resolver, packageDir), /is version 0\.0\.1, not .* as this quietus; it is not run/);
      fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ version: pkg.version }));
    }
    const named = path.join(dir, "bin", "quietus");
    fs.mkdirSync(path.dirname(named), { recursive: true });
    fs.writeFileSync(named, "#!/bin/sh\n", { mode: 0o755 });
    assert.equal(findBinary({ QUIETUS_BINARY_PATH: named }, nothing), named);
    assert.throws(() => findBinary({ QUIETUS_BINARY_PATH: dir }, nothing), /QUIETUS_BINARY_PATH is ".*", which is not a file/);
  } finally {
    fs.rmSync(project, { recursive: true, force: true });
  }
});

test("a platform package planted in a folder above the project is not run", { skip: candidates().length === 0 }, () => {
  // Node's require.resolve walks up to ../node_modules: issue 51, point 14.
  const above = fs.mkdtempSync(path.join(os.tmpdir(), "quietus-planted-"));
  try {
    const planted = path.join(above, "node_modules", "@quietus", candidates()[0].key);
    fs.mkdirSync(path.join(planted, "bin"), { recursive: true });
    fs.writeFileSync(path.join(planted, "package.json"), JSON.stringify({ version: pkg.version }));
    fs.writeFileSync(path.join(planted, "bin", "quietus"), "#!/bin/sh\necho planted\n", { mode: 0o755 });
    const packageDir = path.join(above, "project", "node_modules", "quietus");
    fs.mkdirSync(packageDir, { recursive: true });
    const resolver = () => path.join(planted, "package.json");
    assert.throws(() => findBinary({}, resolver, packageDir), (e) => {
      assert.ok(e instanceof QuietusNotFound);
      assert.match(e.message, /was found at .*quietus-planted-.*, which is not beside this quietus .*; it is not run/);
      return true;
    });
  } finally {
    fs.rmSync(above, { recursive: true, force: true });
  }
});

test("another platform's package where this one's is missing: node_modules was copied", { skip: candidates().length === 0 }, () => {
  const other = PLATFORMS.find((p) => !candidates().includes(p) && p.os !== process.platform);
  const resolver = (request) => {
    if (request === `${packageName(other)}/package.json`) return "/somewhere/package.json";
    return nothing(request);
  };
  assert.throws(() => findBinary({}, resolver), (e) => {
    assert.ok(e instanceof QuietusNotFound);
    assert.match(e.message, new RegExp(`^quietus: node_modules holds the quietus binary of another platform \\(${packageName(other)}\\), but this machine \\(.*\\) needs ${packageName(candidates()[0])}\\.\n`));
    assert.match(e.message, /\n {4}rm -rf node_modules && npm install\n/);
    return true;
  });
});

test("a lock file that lists quietus but not the platform package is named", () => {
  const project = fs.mkdtempSync(path.join(os.tmpdir(), "quietus-lock-"));
  try {
    const packageDir = path.join(project, "node_modules", "quietus");
    fs.mkdirSync(packageDir, { recursive: true });
    assert.equal(lockWithout("@quietus/linux-x64-gnu", packageDir), null); // no lock file
    const write = (packages) => fs.writeFileSync(path.join(project, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages }));
    write({ "": {}, "node_modules/quietus": {} });
    assert.equal(lockWithout("@quietus/linux-x64-gnu", packageDir), path.join(project, "package-lock.json"));
    write({ "": {}, "node_modules/quietus": {}, "node_modules/@quietus/linux-x64-gnu": { optional: true } });
    assert.equal(lockWithout("@quietus/linux-x64-gnu", packageDir), null);
    write({ "": {} }); // not this project's lock file
    assert.equal(lockWithout("@quietus/linux-x64-gnu", packageDir), null);
    const message = missingPackageMessage(PLATFORMS[0], undefined, "/p/package-lock.json", null);
    assert.match(message, /\nHere \/p\/package-lock\.json does not list @quietus\/linux-x64-gnu\.\nTo repair it, install again with optional dependencies and a fresh lock file \(and commit the new lock file\):\n/);
  } finally {
    fs.rmSync(project, { recursive: true, force: true });
  }
});

test("quietus installed from a tarball: the platform package's tarball is named, not the registry nor the lock file", () => {
  const project = fs.mkdtempSync(path.join(os.tmpdir(), "quietus-from-file-"));
  try {
    const packageDir = path.join(project, "node_modules", "quietus");
    fs.mkdirSync(packageDir, { recursive: true });
    const write = (packages) => fs.writeFileSync(path.join(project, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages }));
    write({ "": {}, "node_modules/quietus": { version: "0.2.0", resolved: "https://registry.npmjs.org/quietus/-/quietus-0.2.0.tgz" } });
    assert.equal(installedFromFile(packageDir), null); // from the registry
    write({ "": {}, "node_modules/quietus": { version: "0.2.0", resolved: "file:../packs/quietus-0.2.0.tgz" } });
    const from = path.join(path.dirname(project), "packs", "quietus-0.2.0.tgz");
    assert.equal(installedFromFile(packageDir), from);
    const platform = PLATFORMS.find((p) => p.key === "linux-x64-gnu");
    const message = missingPackageMessage(platform, undefined, path.join(project, "package-lock.json"), from);
    const v = pkg.version;
    const tarball = path.join(path.dirname(from), `quietus-linux-x64-gnu-${v}.tgz`);
    assert.match(message, /^quietus: the quietus binary for this machine \(linux x64 with glibc\) comes in the package @quietus\/linux-x64-gnu, which is not installed\.\n/);
    assert.ok(message.includes(`quietus was installed from ${from}, not from the npm registry`), message);
    assert.ok(message.includes(`\n    npm install ${tarball}\n`), message);
    assert.ok(message.includes(`npm/build.mjs writes quietus-linux-x64-gnu-${v}.tgz beside quietus-0.2.0.tgz`), message);
    // Neither the lock file's fault nor an install from the registry.
    assert.ok(!message.includes("package-lock.json"), message);
    assert.ok(!message.includes(`@quietus/linux-x64-gnu@${v}\n`), message);
  } finally {
    fs.rmSync(project, { recursive: true, force: true });
  }
});
