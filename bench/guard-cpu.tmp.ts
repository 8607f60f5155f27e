// Temporary (not committed): CPU time per step of valet's stream cell, less sensitive to a loaded machine than wall time.
import { frameworks } from "./frameworks/index.js"
const framework = await frameworks["valet"]!()
const steps = 1000
const options = { stream: true, yieldPerCall: false }
for (let i = 0; i < 40; i++) await framework.run(steps, options)
const before = process.cpuUsage()
const runs = 40
for (let i = 0; i < runs; i++) await framework.run(steps, options)
const used = process.cpuUsage(before)
console.log(JSON.stringify({ cpuUsPerStep: (used.user + used.system) / runs / steps }))
