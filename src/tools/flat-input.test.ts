/**
 * What the API does with the flat operation input before the action's strict schema reads it:
 * another action's field that is null or at its published default is dropped (a strict model's
 * filler), one with a value is refused naming the actions it belongs to; a free-form object sent
 * as a string of JSON is decoded; the action's own fields are left alone.
 */
import { describe, expect, it } from 'vitest';
import { OperationToolInput } from '../domain/operation-input.ts';
import { normalizeFlatInput } from './flat-input.ts';

describe('normalizeFlatInput', () => {
  it('refuses a field of another action that holds a value, naming the actions it belongs to', () => {
    expect(() => normalizeFlatInput({ action: 'progress', force: true })).toThrow(
      'Invalid manage_assistant_operation input: force: is not a field of progress (it is for complete): remove it, or send null',
    );
    expect(() => normalizeFlatInput({ action: 'progress', batch_size: 10 })).toThrow(
      'batch_size: is not a field of progress (it is for create, retry_failed)',
    );
  });

  it('leaves the action’s own nulls alone: a required one is missing, naming the action', () => {
    const ownNull = OperationToolInput.safeParse(normalizeFlatInput({ action: 'update', operation_id: null }));
    expect(ownNull.error?.issues[0]?.path).toEqual(['operation_id']);
    expect(ownNull.error?.issues[0]?.message).toBe(
      'missing: update needs the operation’s id (returned by create, shown in the context)'.replace('’', "'"),
    );
    const input = { action: 'pause', operation_id: null };
    expect(normalizeFlatInput(input)).toBe(input);
    expect(normalizeFlatInput(['not', 'an', 'object'])).toEqual(['not', 'an', 'object']);
  });

  it('decodes query_params sent as a string of JSON, and refuses a string that is not an object', () => {
    const call = { action: 'create', operation_type: 'webhook', total_items: 1, item_ids: ['a'] };
    expect(normalizeFlatInput({ ...call, query_params: '{"url":"https://example.com/hook"}' })).toEqual({
      ...call,
      query_params: { url: 'https://example.com/hook' },
    });
    for (const bad of ['not json', '[1,2]', '"a string"', 'null']) {
      expect(() => normalizeFlatInput({ ...call, query_params: bad }), bad).toThrow(
        'query_params: must be a JSON object, or a string holding one',
      );
    }
  });
});
