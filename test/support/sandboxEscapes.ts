/**
 * The sandbox escape table: small python3 programs, run through `Sandbox.runOnce` in a given isolation mode, that
 * try to reach what a sandboxed command should not (host files, the network, other processes, the host's /tmp).
 * Each attempt is judged from outside the sandbox where it can be (a file written "to /tmp" only counts when the
 * host sees it; a private /tmp inside bubblewrap is not an escape).
 *
 * Used by `test/reliability/sandbox.test.ts`; run directly to print the table as markdown:
 *
 *   npx tsx test/support/sandboxEscapes.ts [process|bwrap ...]
 */
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { homedir, tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { Effect } from "effect"
import * as Sandbox from "../../src/environment/Sandbox.js"
import { marker } from "./processes.js"

/** One attempt and whether it got through. */
export interface Attempt {
  readonly name: string
  readonly escaped: boolean
  /** What the command saw (first line), for the report. */
  readonly detail: string
}

export const attemptNames = [
  "read /etc/passwd",
  "read /etc/shadow (root only)",
  "read a secret file in the user's home",
  "read a secret file in the host /tmp",
  "read the valet checkout (cwd)",
  "write the host /tmp",
  "write the host /dev/shm",
  "write outside the workspace (/var/tmp)",
  "TCP connect to a loopback server",
  "see other processes (/proc)",
  "open a host file by handle (open_by_handle_at)"
] as const

// Every attempt prints one JSON line {name: "ok: …" | "blocked: …"}; an exception is a block.
const probe = String.raw`
import ctypes, json, os, socket, sys
args = json.loads(sys.argv[1])
out = {}
def attempt(name, fn):
    try:
        out[name] = "ok: " + str(fn())[:80].replace("\n", " ")
    except BaseException as e:
        out[name] = "blocked: " + type(e).__name__ + ": " + str(e)[:80]
def read(path):
    with open(path) as f:
        return f.read()
def write(path):
    with open(path, "w") as f:
        f.write("escaped")
    return path
def connect():
    s = socket.create_connection(("127.0.0.1", args["port"]), timeout=2)
    data = s.recv(16)
    s.close()
    return data
def processes():
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    host = str(args["hostPid"])
    if host not in pids:
        raise PermissionError("host pid %s not visible (%d pids seen)" % (host, len(pids)))
    return "%d pids, host pid %s: %s" % (len(pids), host, read("/proc/%s/cmdline" % host).replace("\0", " ")[:40])
def by_handle():
    if args["handle"] is None:
        raise OSError("no handle (name_to_handle_at unsupported on the host)")
    libc = ctypes.CDLL(None, use_errno=True)
    raw = bytes.fromhex(args["handle"])
    buf = ctypes.create_string_buffer(raw, len(raw))
    fd = libc.open_by_handle_at(os.open(".", os.O_RDONLY), buf, os.O_RDONLY)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return os.read(fd, 100).decode()
attempt("read /etc/passwd", lambda: read("/etc/passwd"))
attempt("read /etc/shadow (root only)", lambda: read("/etc/shadow"))
attempt("read a secret file in the user's home", lambda: read(args["homeSecret"]))
attempt("read a secret file in the host /tmp", lambda: read(args["tmpSecret"]))
attempt("read the valet checkout (cwd)", lambda: read(args["repoFile"]))
attempt("write the host /tmp", lambda: write("/tmp/" + args["mark"]))
attempt("write the host /dev/shm", lambda: write("/dev/shm/" + args["mark"]))
attempt("write outside the workspace (/var/tmp)", lambda: write("/var/tmp/" + args["mark"]))
attempt("TCP connect to a loopback server", connect)
attempt("see other processes (/proc)", processes)
attempt("open a host file by handle (open_by_handle_at)", by_handle)
print(json.dumps(out))
`

// The kernel's file handle of `path` (struct file_handle: bytes, type, then the handle), as hex, computed on the
// host: what an attacker would brute-force; here handed over to show whether the capability to use one is there.
const handleHelper = String.raw`
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8 + 128)
ctypes.c_uint.from_buffer(buf, 0).value = 128
mount_id = ctypes.c_int()
if libc.name_to_handle_at(-100, sys.argv[1].encode(), buf, ctypes.byref(mount_id), 0) != 0:
    sys.exit(1)
size = ctypes.c_uint.from_buffer(buf, 0).value
print(buf.raw[:8 + size].hex())
`

const fileHandle = (path: string): string | null => {
  try {
    return execFileSync("python3", ["-c", handleHelper, path], { encoding: "utf8" }).trim()
  } catch {
    return null
  }
}

/** Runs every attempt in a sandbox built with `options` and answers what got through. */
export const escapes = (options: Sandbox.Options): Effect.Effect<ReadonlyArray<Attempt>, Sandbox.SandboxError> =>
  Effect.gen(function*() {
    const mark = marker()
    const tmpDir = mkdtempSync(join(tmpdir(), "valet-secret-"))
    const homeDir = mkdtempSync(join(homedir(), ".valet-secret-"))
    const server = createServer((socket) => socket.end("hello"))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        server.close()
        for (const path of [tmpDir, homeDir, `/tmp/${mark}`, `/dev/shm/${mark}`, `/var/tmp/${mark}`]) {
          rmSync(path, { recursive: true, force: true })
        }
      })
    )
    const tmpSecret = join(tmpDir, "secret.txt")
    const homeSecret = join(homeDir, "secret.txt")
    for (const path of [tmpSecret, homeSecret]) {
      writeFileSync(path, `secret-${mark}\n`)
      chmodSync(path, 0o600)
    }
    yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
    const port = (server.address() as { port: number }).port
    const args = {
      mark,
      port,
      hostPid: process.pid,
      tmpSecret,
      homeSecret,
      repoFile: join(process.cwd(), "package.json"),
      handle: fileHandle(homeSecret)
    }
    const sandbox = yield* Sandbox.make(options)
    const result = yield* Effect.provideService(
      Sandbox.runOnce("escape", {}, { command: ["python3", "-c", probe, JSON.stringify(args)], timeoutMs: 20_000 }),
      Sandbox.Sandbox,
      sandbox
    )
    const line = result.stdout.trim().split("\n").at(-1) ?? ""
    let seen: Record<string, string>
    try {
      seen = JSON.parse(line) as Record<string, string>
    } catch {
      return yield* Effect.die(new Error(`the escape probe did not report (exit ${result.exitCode}): ${result.stderr.slice(0, 500)}`))
    }
    // A write only escapes when the host sees the file.
    const onHost: Record<string, string> = {
      "write the host /tmp": `/tmp/${mark}`,
      "write the host /dev/shm": `/dev/shm/${mark}`,
      "write outside the workspace (/var/tmp)": `/var/tmp/${mark}`
    }
    return attemptNames.map((name): Attempt => {
      const detail = seen[name] ?? "not reported"
      const ok = detail.startsWith("ok: ")
      const hostPath = onHost[name]
      if (hostPath !== undefined) {
        const visible = existsSync(hostPath)
        return { name, escaped: visible, detail: ok && !visible ? `${detail} (private: not on the host)` : detail }
      }
      return { name, escaped: ok, detail }
    })
  }).pipe(Effect.scoped)

/** The table as markdown: one row per attempt, one column per mode. */
export const markdown = (columns: ReadonlyArray<readonly [string, ReadonlyArray<Attempt> | string]>): string => {
  const header = `| attempt | ${columns.map(([label]) => label).join(" | ")} |`
  const rule = `|---|${columns.map(() => "---").join("|")}|`
  const rows = attemptNames.map((name) =>
    `| ${name} | ${
      columns.map(([, attempts]) =>
        typeof attempts === "string" ? attempts : attempts.find((a) => a.name === name)?.escaped ? "**escapes**" : "blocked"
      ).join(" | ")
    } |`
  )
  return [header, rule, ...rows].join("\n")
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const modes = process.argv.slice(2).filter((arg) => arg === "process" || arg === "bwrap")
  const columns: Array<readonly [string, ReadonlyArray<Attempt> | string]> = []
  for (const mode of modes.length > 0 ? modes : ["process", "bwrap"] as const) {
    const workRoot = mkdtempSync(join(tmpdir(), `valet-escape-${mode}-`))
    try {
      const outcome = await Effect.runPromise(Effect.result(escapes({ isolation: mode, workRoot })))
      if (outcome._tag === "Failure") columns.push([mode, `unavailable: ${outcome.failure.message}`])
      else {
        columns.push([mode, outcome.success])
        for (const attempt of outcome.success) console.error(`${mode} | ${attempt.name} | ${attempt.detail}`)
      }
    } finally {
      rmSync(workRoot, { recursive: true, force: true })
    }
  }
  console.log(markdown(columns))
}
