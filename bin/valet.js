#!/usr/bin/env node
// The Node check runs before anything is imported: on an older Node, valet's dependencies fail while loading
// or later with an unrelated message ("Cannot read properties of undefined (reading 'bind')" on Node 20), so
// this file stays plain JavaScript with no static import, and loads the command only once the version is known
// to be enough. Keep the minimum in step with "engines" in package.json.
const minimum = [22, 19]
const [major, minor] = process.versions.node.split(".").map(Number)
if (major < minimum[0] || (major === minimum[0] && minor < minimum[1])) {
  process.stderr.write(`valet needs Node >= ${minimum.join(".")} (this is ${process.version})\n`)
  process.exit(2)
}
// Under npx, npm runs the command through `sh -c`, which dies of a SIGTERM without passing it on: the command would
// outlive npx, serving on its port with no parent. Started by npx (npm_command=exec; `npm run valet` execs the
// command, so npm is its parent and passes signals on), it stops, as if interrupted, when the process that started it
// is gone. Started any other way — `nohup valet serve &`, a service manager, a detached child of an npm script — it
// keeps running; VALET_KEEP_RUNNING=1 keeps it running under npx too.
if (process.env.npm_command === "exec" && process.env.VALET_KEEP_RUNNING !== "1") {
  const parent = process.ppid
  setInterval(() => {
    if (process.ppid !== parent) process.kill(process.pid, "SIGTERM")
  }, 250).unref()
}
await import("../dist/cli/bin.js")
