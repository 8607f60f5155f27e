/**
 * An in-memory span exporter for tests: a tracer that keeps every span when it ends (name, ids, parent, attributes,
 * how it ended), installed as the `Tracer` layer.
 */
import { type Exit, Layer, Tracer } from "effect"

/** An ended span, as recorded. */
export interface Recorded {
  readonly name: string
  readonly spanId: string
  readonly parent: string | undefined
  readonly attributes: ReadonlyMap<string, unknown>
  /** Its span events: name, time, attributes. */
  readonly events: Tracer.NativeSpan["events"]
  readonly exit: Exit.Exit<unknown, unknown>
}

/** A tracer that keeps every ended span in `ended`, and its layer. */
export const recordingTracer = () => {
  const ended: Array<Recorded> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      const end = span.end.bind(span)
      span.end = (endTime, exit) => {
        end(endTime, exit)
        ended.push({
          name: span.name,
          spanId: span.spanId,
          parent: span.parent._tag === "Some" ? span.parent.value.spanId : undefined,
          attributes: span.attributes,
          events: span.events,
          exit
        })
      }
      return span
    }
  })
  return { ended, layer: Layer.succeed(Tracer.Tracer, tracer) }
}
