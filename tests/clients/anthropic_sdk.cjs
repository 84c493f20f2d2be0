// One call of the official Anthropic TypeScript SDK (@anthropic-ai/sdk, pinned in package.json)
// against keel serve on 127.0.0.1:PORT serving the bundled tiny-toolcaller (tests/client_sdk_test.cpp).
// Prints "ok CASE: ..." and exits 0, or prints what went wrong and exits 1.
//
//   NODE_PATH=<install>/node_modules node anthropic_sdk.cjs PORT CASE
'use strict';
const { Anthropic } = require('@anthropic-ai/sdk');

const [port, which] = [Number(process.argv[2]), process.argv[3]];
const MODEL = 'tiny-toolcaller';
const client = new Anthropic({
  baseURL: `http://127.0.0.1:${port}`,
  apiKey: 'local',
  maxRetries: 0,
  timeout: 300 * 1000,
});

// The first case of ../shared/fixtures/golden/tiny-toolcaller.session.json: at temperature 0 the
// model answers it with a Bash call.
const TOOLS = [
  {
    name: 'Bash',
    description: 'Execute a bash command and return output.',
    input_schema: {
      type: 'object',
      properties: {
        command: { type: 'string', description: 'The bash command to execute' },
        description: { type: 'string', description: 'Description of what this command does' },
      },
      required: ['command'],
    },
  },
  {
    name: 'Read',
    description: 'Read a file from the filesystem.',
    input_schema: {
      type: 'object',
      properties: { file_path: { type: 'string', description: 'Absolute path to the file' } },
      required: ['file_path'],
    },
  },
];
const REQUEST = {
  model: MODEL,
  max_tokens: 160,
  temperature: 0,
  system: 'You are a helpful coding assistant. When asked to perform tasks, you MUST use the available tools.',
  tools: TOOLS,
  messages: [{ role: 'user', content: 'What files are in /tmp?' }],
};

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}

// A finished message with a valid Bash call: the SDK parsed content blocks, stop_reason and usage.
function checkToolMessage(m) {
  check(m.type === 'message' && m.role === 'assistant', 'type message, role assistant: ' + JSON.stringify(m));
  check(Array.isArray(m.content), 'content is an array');
  const call = m.content.find((b) => b.type === 'tool_use');
  check(call, 'a tool_use block: ' + JSON.stringify(m.content));
  check(call.name === 'Bash' && typeof call.input === 'object' && typeof call.input.command === 'string',
    'Bash call with a string command: ' + JSON.stringify(call));
  check(typeof call.id === 'string' && call.id.length > 0, 'tool_use id');
  check(m.stop_reason === 'tool_use', 'stop_reason tool_use, got ' + m.stop_reason);
  check(m.usage && m.usage.input_tokens > 0 && m.usage.output_tokens > 0, 'usage: ' + JSON.stringify(m.usage));
  return `${call.name} ${JSON.stringify(call.input)}, usage ${JSON.stringify(m.usage)}`;
}

const { WEATHER_SCHEMA, checkWeather } = require('./weather_schema.cjs');

const cases = {
  // output_config.format through the SDK's parse() and stream(): parsed_output is the object.
  async messages_parse_output_format() {
    const { jsonSchemaOutputFormat } = require('@anthropic-ai/sdk/helpers/json-schema');
    const params = {
      model: MODEL, max_tokens: 120, temperature: 0,
      messages: [{ role: 'user', content: 'What is the weather in Paris? Answer as JSON.' }],
      output_config: { format: jsonSchemaOutputFormat(WEATHER_SCHEMA) },
    };
    const m = await client.messages.parse(params);
    checkWeather(m.parsed_output, 'parsed_output');
    check(m.stop_reason === 'end_turn', 'stop_reason end_turn, got ' + m.stop_reason);
    const streamed = await client.messages.stream(params).finalMessage();
    checkWeather(streamed.parsed_output, 'streamed parsed_output');
    return m.content[0].text;
  },

  async messages_create() {
    const m = await client.messages.create(REQUEST);
    return checkToolMessage(m);
  },

  // stream: true through messages.create: the raw events, in the Messages streaming order.
  async messages_create_stream() {
    const stream = await client.messages.create({ ...REQUEST, stream: true });
    const types = [];
    let json = '';
    let toolName = null;
    let stopReason = null;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'content_block_start' && event.content_block.type === 'tool_use') toolName = event.content_block.name;
      if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta') json += event.delta.partial_json;
      if (event.type === 'message_delta') stopReason = event.delta.stop_reason;
    }
    check(types[0] === 'message_start' && types[types.length - 1] === 'message_stop', 'events: ' + types.join(','));
    check(toolName === 'Bash', 'a Bash tool_use block, got ' + toolName);
    const input = JSON.parse(json);
    check(typeof input.command === 'string', 'input_json_delta parts parse to {command}: ' + json);
    check(stopReason === 'tool_use', 'stop_reason tool_use, got ' + stopReason);
    return `${types.length} events, Bash ${json}`;
  },

  // The SDK's own stream accumulator (messages.stream): what most applications use.
  async messages_stream() {
    const stream = client.messages.stream(REQUEST);
    let text = '';
    stream.on('text', (t) => (text += t));
    const m = await stream.finalMessage();
    return checkToolMessage(m) + (text ? `, text ${JSON.stringify(text)}` : '');
  },

  async count_tokens() {
    const { system, tools, messages } = REQUEST;
    const r = await client.messages.countTokens({ model: MODEL, system, tools, messages });
    check(Number.isInteger(r.input_tokens) && r.input_tokens > 0, 'input_tokens: ' + JSON.stringify(r));
    return `input_tokens ${r.input_tokens}`;
  },

  async models_list() {
    const ids = [];
    for await (const m of client.models.list()) {
      check(m.type === 'model' && typeof m.id === 'string', 'model entry: ' + JSON.stringify(m));
      ids.push(m.id);
    }
    check(ids.includes(MODEL), `${MODEL} listed: ${JSON.stringify(ids)}`);
    return ids.join(',');
  },

  async models_retrieve() {
    const m = await client.models.retrieve(MODEL);
    check(m.type === 'model' && m.id === MODEL, 'model: ' + JSON.stringify(m));
    let missing = null;
    try {
      await client.models.retrieve('no-such-model');
    } catch (e) {
      missing = e;
    }
    check(missing instanceof Anthropic.NotFoundError, 'an unknown model is a NotFoundError, got ' + missing);
    return JSON.stringify(m);
  },
};

(async () => {
  if (!cases[which]) throw new Error(`unknown case ${which}; cases: ${Object.keys(cases).join(' ')}`);
  const detail = await cases[which]();
  console.log(`ok ${which}: ${detail}`);
})().catch((e) => {
  console.log(`FAILED ${which}: ${e && e.stack ? e.stack : e}`);
  if (e && e.status) console.log(`HTTP ${e.status} ${JSON.stringify(e.error)}`);
  process.exit(1);
});
