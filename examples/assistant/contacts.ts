/**
 * The example app's own tools: a contact search and an SMS sender, simulated. Every 12th contact
 * has no phone number, so the SMS fails for it.
 */
import type { LocalTool } from './assistant.ts';

export function contactTools(count: number) {
  const contacts = Array.from({ length: count }, (_, i) => `contact-${i + 1}`);
  const sent: string[] = [];
  const hasNoPhone = (id: string) => Number(id.split('-')[1]) % 12 === 0;
  const tools: LocalTool[] = [
    {
      name: 'search_contacts',
      description: 'The ids of the contacts with a tag.',
      parameters: {
        type: 'object',
        properties: { tag: { type: 'string' } },
        required: ['tag'],
        additionalProperties: false,
      },
      run: async () => ({ contact_ids: contacts }),
    },
    {
      name: 'send_sms',
      description: 'Sends the follow-up SMS to each contact; answers which were sent and which failed.',
      parameters: {
        type: 'object',
        properties: { contact_ids: { type: 'array', items: { type: 'string' } } },
        required: ['contact_ids'],
        additionalProperties: false,
      },
      run: async (args) => {
        const ids = (args.contact_ids as string[]) ?? [];
        const ok = ids.filter((id) => !hasNoPhone(id));
        sent.push(...ok);
        return { sent: ok, failed: ids.filter(hasNoPhone).map((id) => ({ id, reason: 'no phone number' })) };
      },
    },
  ];
  return { tools, sent, contacts, hasNoPhone };
}
