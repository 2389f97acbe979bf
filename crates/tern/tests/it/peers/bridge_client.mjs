// The TypeScript SDK 2.4 as a 2026-07-28 client (pinned) calling a tool
// whose server asks live, through `tern gateway` (which holds the 2025
// upstream's call and answers `input_required`): its elicitation handler
// answers the form, the SDK retries with the answer (multi-round-trip
// auto-fulfilment), and the result is printed. Run with its working
// directory where the SDK is installed (.cache/peers/skills-ts):
//   BRIDGE_URL=http://127.0.0.1:PORT/mcp BRIDGE_TOOL=provision_database \
//     node --input-type=module -e "$(cat bridge_client.mjs)"
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const client = new Client(
  { name: 'ts-bridge-client', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
const asked = [];
client.setRequestHandler('elicitation/create', async (request) => {
  asked.push(request.params.message);
  return { action: 'accept', content: { region: 'ap-south-1' } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(process.env.BRIDGE_URL)));
console.log(`version ${client.getNegotiatedProtocolVersion?.() ?? '?'}`);
const result = await client.callTool({ name: process.env.BRIDGE_TOOL, arguments: { name: 'orders' } });
console.log(`asked ${asked.join(' | ')}`);
console.log(`result ${result.content.map((c) => c.text).join('')}`);
await client.close();
