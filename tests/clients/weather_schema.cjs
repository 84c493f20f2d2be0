// The structured-output schema both SDK scripts ask for, and the check of what they parse. Every
// value is an enum or a boolean, so the tiny model's answer (it writes any string forever) ends
// within a few tokens.
'use strict';

const WEATHER_SCHEMA = {
  type: 'object',
  properties: {
    city: { type: 'string', enum: ['Paris', 'Tokyo', 'Lima'] },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    sunny: { type: 'boolean' },
  },
  required: ['city', 'unit', 'sunny'],
  additionalProperties: false,
};

// Throws unless `parsed` is an object of exactly the schema's three properties with allowed values.
function checkWeather(parsed, where) {
  const ok =
    parsed &&
    ['Paris', 'Tokyo', 'Lima'].includes(parsed.city) &&
    ['celsius', 'fahrenheit'].includes(parsed.unit) &&
    typeof parsed.sunny === 'boolean' &&
    Object.keys(parsed).length === 3;
  if (!ok) throw new Error(`check failed: ${where} is not a weather object: ${JSON.stringify(parsed)}`);
}

module.exports = { WEATHER_SCHEMA, checkWeather };
