// Where the quietus binary comes from: the package of this platform (an optional dependency
// of `quietus`), or QUIETUS_BINARY_PATH.

import * as fs from "node:fs";
import * as path from "node:path";
import { QuietusNotFound } from "./errors";

/** One platform the binary is built for, and the npm package that carries it. */
export interface Platform {
  /** The key: `linux-x64-gnu`, `darwin-arm64`… (the package is `@quietus/<key>`). */
  readonly key: string;
  /** `process.platform` (the package's `os`). */
  readonly os: "linux" | "darwin";
  /** `process.arch` (the package's `cpu`). */
  readonly cpu: "x64" | "arm64";
  /** The C library (the package's `libc`), for Linux. */
  readonly libc?: "glibc" | "musl";
  /** The Rust target the release builds it for. */
  readonly rustTarget: string;
}

/** Every platform a package is declared for. */
export const PLATFORMS: readonly Platform[] = [
  { key: "linux-x64-gnu", os: "linux", cpu: "x64", libc: "glibc", rustTarget: "x86_64-unknown-linux-gnu" },
  { key: "linux-arm64-gnu", os: "linux", cpu: "arm64", libc: "glibc", rustTarget: "aarch64-unknown-linux-gnu" },
  { key: "linux-x64-musl", os: "linux", cpu: "x64", libc: "musl", rustTarget: "x86_64-unknown-linux-musl" },
  { key: "darwin-x64", os: "darwin", cpu: "x64", rustTarget: "x86_64-apple-darwin" },
  { key: "darwin-arm64", os: "darwin", cpu: "arm64", rustTarget: "aarch64-apple-darwin" },
];

/** The npm scope of the platform packages. */
export const SCOPE = "@quietus";

/** The package of a platform: `@quietus/linux-x64-gnu`. */
export function packageName(platform: Platform): string {
  return `${SCOPE}/${platform.key}`;
}

/** The variable that names a binary to use instead of the platform package's. */
export const BINARY_PATH_VARIABLE = "QUIETUS_BINARY_PATH";

/** This package's version (the platform packages have the same). */
export function version(): string {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  return (require("../package.json") as { version: string }).version;
}

/** The C library of this Linux: `glibc` or `musl`. */
export function linuxLibc(): "glibc" | "musl" {
  // As detect-libc does: ldd's own text first (cheap), then Node's report.
  try {
    const ldd = fs.readFileSync("/usr/bin/ldd", "latin1");
    if (ldd.includes("musl")) return "musl";
    if (ldd.includes("GNU C Library") || ldd.includes("GLIBC")) return "glibc";
  } catch {
    // no ldd: ask Node
  }
  try {
    const report = process.report?.getReport() as unknown;
    const parsed = (typeof report === "string" ? JSON.parse(report) : report) as {
      header?: { glibcVersionRuntime?: string };
    };
    return parsed?.header?.glibcVersionRuntime ? "glibc" : "musl";
  } catch {
    return "glibc";
  }
}

/** The platforms whose binary runs here, the best first (a static musl binary also runs on
 * a glibc Linux). */
export function candidates(
  os: string = process.platform,
  cpu: string = process.arch,
  libc: "glibc" | "musl" | undefined = os === "linux" ? linuxLibc() : undefined,
): Platform[] {
  const here = PLATFORMS.filter((p) => p.os === os && p.cpu === cpu);
  if (os !== "linux") return here;
  const exact = here.filter((p) => p.libc === libc);
  const musl = libc === "glibc" ? here.filter((p) => p.libc === "musl") : [];
  return [...exact, ...musl];
}

function describe(os: string, cpu: string, libc?: string): string {
  return `${os} ${cpu}${libc ? ` with ${libc}` : ""}`;
}

/** The command that adds a package, in the words of the package manager that runs us. */
function addCommand(spec: string): string {
  const agent = process.env.npm_config_user_agent ?? "";
  if (agent.startsWith("pnpm/")) return `pnpm add ${spec}`;
  if (agent.startsWith("yarn/")) return `yarn add ${spec}`;
  if (agent.startsWith("bun/")) return `bun add ${spec}`;
  return `npm install ${spec}`;
}

/** The package-lock.json of the project this package is installed in (node_modules/quietus →
 * the project), parsed, with its path; null when there is none. */
function projectLock(packageDir: string): { file: string; packages: Record<string, unknown> } | null {
  const file = path.resolve(packageDir, "..", "..", "package-lock.json");
  try {
    const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as { packages?: Record<string, unknown> };
    return { file, packages: parsed.packages ?? {} };
  } catch {
    return null;
  }
}

/**
 * The package-lock.json of the project this package is installed in (node_modules/quietus →
 * the project), when it lists quietus but not `name`: the lock file npm/cli#4828 leaves behind.
 */
export function lockWithout(name: string, packageDir: string = path.dirname(__dirname)): string | null {
  const lock = projectLock(packageDir);
  if (!lock || !Object.hasOwn(lock.packages, "node_modules/quietus")) return null;
  return Object.hasOwn(lock.packages, `node_modules/${name}`) ? null : lock.file;
}

/**
 * Where quietus was installed from when that was a file (a tarball made by npm/build.mjs, or a
 * folder), not the registry: the path the project's package-lock.json records (`file:…`,
 * relative to the project), made absolute; null otherwise.
 */
export function installedFromFile(packageDir: string = path.dirname(__dirname)): string | null {
  const lock = projectLock(packageDir);
  const entry = lock?.packages["node_modules/quietus"] as { resolved?: unknown } | undefined;
  const resolved = typeof entry?.resolved === "string" ? entry.resolved : "";
  if (!lock || !resolved.startsWith("file:")) return null;
  return path.resolve(path.dirname(lock.file), resolved.slice("file:".length));
}

/** The tarball `npm pack` makes of a platform's package: `quietus-linux-x64-gnu-0.2.0.tgz`. */
function tarballName(platform: Platform, v: string): string {
  return `${packageName(platform).replace(/^@/, "").replace("/", "-")}-${v}.tgz`;
}

const BINARY_PATH_HINT = `or set ${BINARY_PATH_VARIABLE} to the path of a quietus binary (a release's, or target/release/quietus of cargo build --release -p quietus-cli).`;

/** The message for a missing platform package: why, and how to repair it. `from`: the file
 * quietus was installed from, when it was not the registry ({@link installedFromFile}). */
export function missingPackageMessage(
  platform: Platform,
  libc?: string,
  lock: string | null = lockWithout(packageName(platform)),
  from: string | null = installedFromFile(),
): string {
  const name = packageName(platform);
  const v = version();
  const first = `quietus: the quietus binary for this machine (${describe(platform.os, platform.cpu, libc ?? platform.libc)}) comes in the package ${name}, which is not installed.`;
  if (from) {
    // Installed from a tarball or a folder: npm looked for the platform package in the
    // registry (an optional dependency is skipped when it cannot be had), or was told to omit
    // it. Its tarball is made beside quietus's, by the same build.
    const tarball = path.join(path.dirname(from), tarballName(platform, v));
    return [
      first,
      `quietus was installed from ${from}, not from the npm registry, so its platform package must be installed the same way:`,
      `npm looks for ${name}@${v} in the registry and skips an optional dependency it cannot get there (and omits it with --omit=optional).`,
      fs.existsSync(tarball)
        ? `To repair it, install the platform package's tarball made with it:`
        : `To repair it, install the platform package's tarball made with it (npm/build.mjs writes ${tarballName(platform, v)} beside ${path.basename(from)}):`,
      `    ${addCommand(tarball)}`,
      BINARY_PATH_HINT,
    ].join("\n");
  }
  const lines = [
    first,
    `npm installs it as an optional dependency of quietus, and leaves it out when optional dependencies are omitted`,
    `(--omit=optional, --no-optional, npm_config_omit=optional) or when package-lock.json was written on another platform:`,
    `npm drops the optional dependencies of the other platforms from the lock file (npm/cli#4828, openai/codex#13555).`,
  ];
  if (lock) lines.push(`Here ${lock} does not list ${name}.`);
  lines.push(
    `To repair it, install again with optional dependencies and a fresh lock file${lock ? " (and commit the new lock file)" : ""}:`,
    `    rm -rf node_modules package-lock.json && npm install`,
    `or add this platform's package yourself:`,
    `    ${addCommand(`${name}@${v}`)}`,
    BINARY_PATH_HINT,
  );
  return lines.join("\n");
}

/** The message for a node_modules that holds other platforms' packages but not this one's. */
export function otherPlatformMessage(platform: Platform, others: readonly Platform[], libc?: string): string {
  const name = packageName(platform);
  return [
    `quietus: node_modules holds the quietus binary of another platform (${others.map(packageName).join(", ")}), but this machine (${describe(platform.os, platform.cpu, libc ?? platform.libc)}) needs ${name}.`,
    `It was installed on another machine and copied here (node_modules copied into a Docker image, or between macOS and Linux),`,
    `or installed by a Node of another architecture (npm under Rosetta 2 on a Mac).`,
    `To repair it, install on this machine instead of copying node_modules:`,
    `    rm -rf node_modules && npm install`,
    `or add this platform's package yourself:`,
    `    ${addCommand(`${name}@${version()}`)}`,
    `or set ${BINARY_PATH_VARIABLE} to the path of a quietus binary.`,
  ].join("\n");
}

function executable(file: string): string | null {
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) return "is not a file";
    fs.accessSync(file, fs.constants.X_OK);
    return null;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT" ? "does not exist" : `cannot be executed (${(e as Error).message})`;
  }
}

/** Why the platform package found at `manifest` is not this quietus's own: it is neither beside
 * the main package in its node_modules (as npm, pnpm and yarn place it) nor in the main
 * package's own node_modules, or its version differs; null when it is ours. */
function notOurs(manifest: string, platform: Platform, packageDir: string): string | null {
  const real = (p: string): string => {
    try {
      return fs.realpathSync(p);
    } catch {
      return path.resolve(p);
    }
  };
  const found = real(path.dirname(manifest));
  const places = [
    path.join(path.dirname(real(packageDir)), SCOPE, platform.key),
    path.join(real(packageDir), "node_modules", SCOPE, platform.key),
  ];
  if (!places.includes(found)) {
    return `is not beside this quietus (${real(packageDir)})`;
  }
  try {
    const theirs = (JSON.parse(fs.readFileSync(manifest, "utf8")) as { version?: unknown }).version;
    if (theirs !== version()) return `is version ${String(theirs)}, not ${version()} as this quietus`;
  } catch (e) {
    return `cannot be read (${(e as Error).message})`;
  }
  return null;
}

/** Resolves a module the way `require` does from this package (a seam for the tests). */
export type Resolver = (request: string) => string;

/**
 * The path of the quietus binary: `QUIETUS_BINARY_PATH` when set, else the binary of this
 * platform's package (found with `require.resolve`, as Node finds any dependency).
 *
 * @throws QuietusNotFound saying what is missing and how to repair it.
 */
export function findBinary(
  env: NodeJS.ProcessEnv = process.env,
  resolve: Resolver = require.resolve,
  packageDir: string = path.dirname(__dirname),
): string {
  const named = env[BINARY_PATH_VARIABLE];
  if (named) {
    const problem = executable(named);
    if (problem) {
      throw new QuietusNotFound(`quietus: ${BINARY_PATH_VARIABLE} is ${JSON.stringify(named)}, which ${problem}: set it to the path of a quietus binary, or unset it to use the platform package's.`);
    }
    return path.resolve(named);
  }
  const os = process.platform;
  const cpu = process.arch;
  const libc = os === "linux" ? linuxLibc() : undefined;
  const wanted = candidates(os, cpu, libc);
  if (wanted.length === 0) {
    const list = PLATFORMS.map((p) => p.key).join(", ");
    throw new QuietusNotFound(`quietus: no quietus binary is built for ${describe(os, cpu, libc)}; the platforms are ${list}. Set ${BINARY_PATH_VARIABLE} to a quietus binary built for this machine (cargo build --release -p quietus-cli).`);
  }
  for (const platform of wanted) {
    let manifest: string;
    try {
      manifest = resolve(`${packageName(platform)}/package.json`);
    } catch {
      continue;
    }
    // Node's resolution walks up every ancestor's node_modules: a package planted in a folder
    // above the project would be run. Only one beside this package (or in its own
    // node_modules), at this package's version, is ours.
    const foreign = notOurs(manifest, platform, packageDir);
    if (foreign) {
      throw new QuietusNotFound(`quietus: ${packageName(platform)} was found at ${path.dirname(manifest)}, which ${foreign}; it is not run. Install the platform package beside quietus (${addCommand(`${packageName(platform)}@${version()}`)}) or set ${BINARY_PATH_VARIABLE}.`, packageName(platform));
    }
    const binary = path.join(path.dirname(manifest), "bin", "quietus");
    const problem = executable(binary);
    if (problem) {
      throw new QuietusNotFound(`quietus: the package ${packageName(platform)} is installed (${path.dirname(manifest)}) but its binary ${binary} ${problem}: install it again (${addCommand(`${packageName(platform)}@${version()}`)}).`, packageName(platform));
    }
    return binary;
  }
  const first = wanted[0] as Platform;
  // Another platform's package where this one's is missing: node_modules was installed
  // elsewhere and copied here.
  const others = PLATFORMS.filter((p) => !wanted.includes(p)).filter((p) => {
    try {
      resolve(`${packageName(p)}/package.json`);
      return true;
    } catch {
      return false;
    }
  });
  if (others.length > 0) {
    throw new QuietusNotFound(otherPlatformMessage(first, others, libc), packageName(first));
  }
  throw new QuietusNotFound(missingPackageMessage(first, libc), packageName(first));
}
