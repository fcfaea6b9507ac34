#!/usr/bin/env node
// Builds the npm packages of quietus: compiles the main package (npm/quietus, TypeScript),
// copies a built binary into each platform package (npm/platforms/<platform>/bin/quietus) and
// runs `npm pack` for each into the output folder. Node only, no dependencies.
//
//   node npm/build.mjs [--binary PATH] [--platform KEY] [--dist DIR] [--out DIR] [--all]
//
//   --binary PATH   the binary of --platform (default: target/release/quietus, from
//                   `cargo build --release -p quietus-cli`; CI passes target/debug/quietus)
//   --platform KEY  the platform of --binary (default: this machine's, e.g. linux-x64-gnu)
//   --dist DIR      a release's binaries, DIR/<platform>/quietus (target/dist of the release
//                   script): every platform found there is filled and packed
//   --out DIR       where the tarballs go (default: target/npm)
//   --all           fail unless every platform got a binary (a release)
//   --strip         strip the copies of the binaries (a debug build: 75 MB -> 12 MB; the
//                   release's dist build is stripped already)
//   --sync-version  write the workspace's version (Cargo.toml) into every package.json (the
//                   main package, its optionalDependencies, the platform packages), and stop
//
// Before anything it checks that the layout agrees with itself: the platforms of
// src/platform.ts, the platform packages' os/cpu/libc, the main package's
// optionalDependencies, and one version everywhere, the workspace's (Cargo.toml).

import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const npmDir = path.dirname(fileURLToPath(import.meta.url));
const repo = path.dirname(npmDir);
const mainDir = path.join(npmDir, "quietus");

function fail(message) {
  process.stderr.write(`build.mjs: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const options = { binary: null, platform: null, dist: null, out: path.join(repo, "target", "npm"), all: false, syncVersion: false, strip: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) fail(`${arg} needs a value`);
      return v;
    };
    if (arg === "--binary") options.binary = path.resolve(value());
    else if (arg === "--platform") options.platform = value();
    else if (arg === "--dist") options.dist = path.resolve(value());
    else if (arg === "--out") options.out = path.resolve(value());
    else if (arg === "--all") options.all = true;
    else if (arg === "--sync-version") options.syncVersion = true;
    else if (arg === "--strip") options.strip = true;
    else if (arg === "-h" || arg === "--help") {
      const text = fs.readFileSync(fileURLToPath(import.meta.url), "utf8");
      const header = text.split("\n").slice(1).filter((l, i, all) => all.slice(0, i + 1).every((x) => x.startsWith("//")));
      process.stdout.write(`${header.map((l) => l.replace(/^\/\/ ?/, "")).join("\n")}\n`);
      process.exit(0);
    } else fail(`unknown argument ${JSON.stringify(arg)}; see --help`);
  }
  return options;
}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

function run(cmd, args, cwd) {
  return execFileSync(cmd, args, { cwd, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" });
}

function cargoVersion() {
  const text = fs.readFileSync(path.join(repo, "Cargo.toml"), "utf8");
  const section = /\[workspace\.package\]([\s\S]*?)(\n\[|$)/.exec(text);
  const version = section && /^version\s*=\s*"([^"]+)"/m.exec(section[1]);
  if (!version) fail("no version in [workspace.package] of Cargo.toml");
  return version[1];
}

/** Compiles the main package (installing its devDependencies first when they are missing). */
function compile() {
  if (!fs.existsSync(path.join(mainDir, "node_modules", "typescript"))) {
    // No lock file: the package's optional dependencies are the platform packages of its own
    // version, which the registry has only once they are published (npm ci would refuse a
    // lock file without them); the devDependencies are pinned to exact versions instead.
    process.stderr.write("== npm install (typescript, @types/node)\n");
    execFileSync("npm", ["install", "--no-package-lock", "--no-save", "--no-audit", "--no-fund"], { cwd: mainDir, stdio: "inherit" });
  }
  fs.rmSync(path.join(mainDir, "dist"), { recursive: true, force: true });
  execFileSync(process.execPath, [path.join(mainDir, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], {
    cwd: mainDir,
    stdio: "inherit",
  });
}

/** The layout agrees with itself; returns the platforms. */
function checkLayout(platforms, packageName) {
  const version = cargoVersion();
  const main = readJson(path.join(mainDir, "package.json"));
  if (main.version !== version) fail(`npm/quietus/package.json has version ${main.version}, Cargo.toml ${version}`);
  const optional = main.optionalDependencies ?? {};
  const expected = platforms.map(packageName);
  const listed = Object.keys(optional);
  if (JSON.stringify([...listed].sort()) !== JSON.stringify([...expected].sort())) {
    fail(`the optionalDependencies of npm/quietus (${listed.join(", ")}) are not the platforms of src/platform.ts (${expected.join(", ")})`);
  }
  for (const platform of platforms) {
    const name = packageName(platform);
    if (optional[name] !== version) fail(`npm/quietus depends on ${name}@${optional[name]}, not ${version}`);
    const file = path.join(npmDir, "platforms", platform.key, "package.json");
    if (!fs.existsSync(file)) fail(`${path.relative(repo, file)} is missing`);
    const pkg = readJson(file);
    const want = { name, version, os: [platform.os], cpu: [platform.cpu], libc: platform.libc ? [platform.libc] : undefined };
    for (const [field, value] of Object.entries(want)) {
      if (JSON.stringify(pkg[field]) !== JSON.stringify(value)) {
        fail(`${path.relative(repo, file)}: ${field} is ${JSON.stringify(pkg[field])}, expected ${JSON.stringify(value)}`);
      }
    }
  }
  return version;
}

function fill(platform, binary, strip) {
  if (!fs.existsSync(binary)) fail(`no binary at ${binary} for ${platform.key} (build it: cargo build --release -p quietus-cli)`);
  const bin = path.join(npmDir, "platforms", platform.key, "bin");
  fs.mkdirSync(bin, { recursive: true });
  const target = path.join(bin, "quietus");
  fs.rmSync(target, { force: true });
  fs.copyFileSync(binary, target);
  fs.chmodSync(target, 0o755);
  if (strip) {
    try {
      execFileSync("strip", [target], { stdio: ["ignore", "ignore", "inherit"] });
    } catch (e) {
      process.stderr.write(`build.mjs: not stripped (${e.code === "ENOENT" ? "no strip command: install binutils" : e.message})\n`);
    }
  }
  // The licenses, at the root of every package (npm packs LICENSE* files whatever "files" says).
  for (const license of ["LICENSE-MIT", "LICENSE-APACHE"]) {
    fs.copyFileSync(path.join(repo, license), path.join(npmDir, "platforms", platform.key, license));
  }
}

function pack(dir, out) {
  const output = run("npm", ["pack", "--json", "--pack-destination", out], dir);
  const [info] = JSON.parse(output);
  return path.join(out, info.filename);
}

/** Writes the workspace's version into every package.json of the layout. */
function syncVersion() {
  const version = cargoVersion();
  const write = (file, edit) => {
    const pkg = readJson(file);
    edit(pkg);
    fs.writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`);
    process.stderr.write(`${path.relative(repo, file)}: ${version}\n`);
  };
  write(path.join(mainDir, "package.json"), (pkg) => {
    pkg.version = version;
    for (const name of Object.keys(pkg.optionalDependencies ?? {})) pkg.optionalDependencies[name] = version;
  });
  for (const key of fs.readdirSync(path.join(npmDir, "platforms"))) {
    const file = path.join(npmDir, "platforms", key, "package.json");
    if (fs.existsSync(file)) write(file, (pkg) => (pkg.version = version));
  }
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  if (options.syncVersion) return syncVersion();
  compile();
  const require = createRequire(import.meta.url);
  const { PLATFORMS, packageName, candidates } = require(path.join(mainDir, "dist", "platform.js"));
  checkLayout(PLATFORMS, packageName);
  const byKey = new Map(PLATFORMS.map((p) => [p.key, p]));

  // Which platforms get which binary.
  const filled = new Map();
  if (options.dist) {
    for (const platform of PLATFORMS) {
      const binary = path.join(options.dist, platform.key, "quietus");
      if (fs.existsSync(binary)) filled.set(platform.key, binary);
    }
  }
  if (options.binary || !options.dist) {
    const key = options.platform ?? candidates()[0]?.key;
    if (!key) fail(`no platform package is declared for ${process.platform} ${process.arch}: give --platform`);
    if (!byKey.has(key)) fail(`--platform ${key} is not one of ${[...byKey.keys()].join(", ")}`);
    filled.set(key, options.binary ?? path.join(repo, "target", "release", "quietus"));
  }
  if (options.all) {
    const missing = PLATFORMS.filter((p) => !filled.has(p.key)).map((p) => p.key);
    if (missing.length) fail(`--all: no binary for ${missing.join(", ")}`);
  }
  // Stale binaries of earlier builds are not packed.
  for (const platform of PLATFORMS) {
    if (!filled.has(platform.key)) fs.rmSync(path.join(npmDir, "platforms", platform.key, "bin"), { recursive: true, force: true });
  }

  fs.mkdirSync(options.out, { recursive: true });
  for (const license of ["LICENSE-MIT", "LICENSE-APACHE"]) fs.copyFileSync(path.join(repo, license), path.join(mainDir, license));
  const tarballs = [pack(mainDir, options.out)];
  for (const [key, binary] of filled) {
    fill(byKey.get(key), binary, options.strip);
    tarballs.push(pack(path.join(npmDir, "platforms", key), options.out));
  }
  for (const t of tarballs) process.stdout.write(`${t}\n`);
}

main();
