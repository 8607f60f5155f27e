// The `useChat` page of test/serve/ChatApi.test.ts, bundled by the test with esbuild and served by its valet server:
// the README's front-end code for `POST /agents/:name/chat`, with ids for the test to find things by. Tool calls that
// wait for approval show Approve / Reject; answered, useChat sends the answers by itself (sendAutomaticallyWhen).
import { useChat } from "@ai-sdk/react"
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai"
import { useState } from "react"
import { createRoot } from "react-dom/client"

function Chat() {
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    transport: new DefaultChatTransport({ api: "/agents/calculator/chat" }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses
  })
  const [input, setInput] = useState("")
  return (
    <main>
      {messages.map((message) => (
        <div key={message.id} className={`message ${message.role}`}>
          {message.parts.map((part, i) =>
            part.type === "text" ? <p key={i}>{part.text}</p>
            : part.type === "dynamic-tool" && part.state === "approval-requested" ? (
              <div key={i} className="approval">
                {part.toolName}({JSON.stringify(part.input)})?
                <button className="approve" onClick={() => addToolApprovalResponse({ id: part.approval.id, approved: true })}>Approve</button>
                <button className="reject" onClick={() => addToolApprovalResponse({ id: part.approval.id, approved: false, reason: "not now" })}>Reject</button>
              </div>
            )
            : part.type === "dynamic-tool" && part.state === "output-denied" ? <pre key={i} className="tool">{part.toolName}({JSON.stringify(part.input)}) → denied</pre>
            : part.type === "dynamic-tool" ? <pre key={i} className="tool">{part.toolName}({JSON.stringify(part.input)}) → {String(part.output)}</pre>
            : null
          )}
        </div>
      ))}
      <form onSubmit={(event) => { event.preventDefault(); sendMessage({ text: input }); setInput("") }}>
        <input id="input" value={input} onChange={(event) => setInput(event.target.value)} />
        <button type="submit" disabled={status !== "ready"}>Send</button>
      </form>
      <p id="status">{status}</p>
      {error && <p id="error">{error.message}</p>}
    </main>
  )
}

createRoot(document.getElementById("root")).render(<Chat />)
