-- Seed data for email. The logged-in user is users.id = 1 (Olivia Grant, mailbox MB-1). Now is 2025-06-02 09:00.

-- users
INSERT INTO users (id, name) VALUES (1, 'Olivia Grant');
INSERT INTO users (id, name) VALUES (2, 'Ben Carter');
INSERT INTO users (id, name) VALUES (3, 'Nora Lindqvist');

-- mailboxes
INSERT INTO mailboxes (mailbox_id, user_id, address, display_name, signature) VALUES ('MB-1', 1, 'olivia.grant@lumenmail.com', 'Olivia Grant', 'Best,
Olivia');
INSERT INTO mailboxes (mailbox_id, user_id, address, display_name, signature) VALUES ('MB-2', 2, 'ben.carter@lumenmail.com', 'Ben Carter', '-- Ben');
INSERT INTO mailboxes (mailbox_id, user_id, address, display_name, signature) VALUES ('MB-3', 3, 'nora.lindqvist@lumenmail.com', 'Nora Lindqvist', '');

-- contacts
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-101', 'MB-1', 'Rachel Adams', 'rachel.adams@brightpath.co', 'Brightpath Consulting', 1);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-102', 'MB-1', 'Rachel Addams', 'r.addams@fernwood.org', 'Fernwood Library', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-103', 'MB-1', 'Tom Becker', 'tom.becker@beckerproperties.com', 'Becker Properties', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-104', 'MB-1', 'Dana Whitaker', 'dana.whitaker@gmail.com', '', 1);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-105', 'MB-1', 'Dan Whitaker', 'dan.w@whitakerlaw.com', 'Whitaker Law', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-106', 'MB-1', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'Lumen', 1);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-107', 'MB-1', 'Aisha Khan', 'aisha.khan@northwind.io', 'Northwind', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-108', 'MB-1', 'Chris Moreno', 'chris.moreno@brightpath.co', 'Brightpath Consulting', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-109', 'MB-1', 'Helen Park', 'helen.park@stmarys-school.org', 'St Mary''s School', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-110', 'MB-1', 'Jonas Weber', 'jonas.weber@lumenmail.com', 'Lumen', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-111', 'MB-1', 'Priya Shah', 'priya.shah@cityclinic.com', 'City Clinic', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-112', 'MB-1', 'Ben Carter', 'ben.carter@lumenmail.com', 'Lumen', 1);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-113', 'MB-1', 'Lucy Grant', 'lucy.grant@gmail.com', '', 1);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-114', 'MB-1', 'Samir Haddad', 'samir@haddadstudio.design', 'Haddad Studio', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-115', 'MB-1', 'Emily Chen', 'emily.chen@northwind.io', 'Northwind', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-201', 'MB-2', 'Olivia Grant', 'olivia.grant@lumenmail.com', 'Lumen', 1);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-202', 'MB-2', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'Lumen', 0);
INSERT INTO contacts (contact_id, mailbox_id, name, email, company, is_favorite) VALUES ('CT-301', 'MB-3', 'Ben Carter', 'ben.carter@lumenmail.com', 'Lumen', 0);

-- labels
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-11', 'MB-1', 'Finance', 'green');
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-12', 'MB-1', 'Family', 'pink');
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-13', 'MB-1', 'Travel', 'blue');
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-14', 'MB-1', 'Clients', 'orange');
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-15', 'MB-1', 'Receipts', 'gray');
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-16', 'MB-1', 'Newsletters', 'purple');
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-21', 'MB-2', 'Finance', 'green');
INSERT INTO labels (label_id, mailbox_id, name, color) VALUES ('LBL-22', 'MB-2', 'Projects', 'blue');

-- threads
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-301', 'MB-1', 'Invoice #4471 for May');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-302', 'MB-1', 'Lease renewal for 14 Alder St, Unit 3');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-303', 'MB-1', 'Your Aurora Air booking QX7P2L');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-304', 'MB-1', 'Your Aurora Air booking ZP4M9K');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-305', 'MB-1', 'Q2 workshop agenda');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-306', 'MB-1', 'Library book hold ready');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-307', 'MB-1', 'Dinner Friday?');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-308', 'MB-1', 'School trip permission form');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-309', 'MB-1', 'Contract draft v3');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-310', 'MB-1', 'Appointment reminder');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-311', 'MB-1', 'The Daily Brief: Markets rally #200');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-312', 'MB-1', 'Product Hunt Digest: Top launches #201');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-313', 'MB-1', 'Seattle Eats: Best new brunch spots #202');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-314', 'MB-1', 'The Daily Brief: Rates on hold #203');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-315', 'MB-1', 'Product Hunt Digest: AI tools roundup #204');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-316', 'MB-1', 'Seattle Eats: Food truck guide #205');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-317', 'MB-1', 'The Daily Brief: Markets rally #206');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-318', 'MB-1', 'Product Hunt Digest: Top launches #207');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-319', 'MB-1', 'Seattle Eats: Best new brunch spots #208');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-320', 'MB-1', 'The Daily Brief: Rates on hold #209');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-321', 'MB-1', 'Product Hunt Digest: AI tools roundup #210');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-322', 'MB-1', 'Seattle Eats: Food truck guide #211');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-323', 'MB-1', 'The Daily Brief: Markets rally #212');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-324', 'MB-1', 'Product Hunt Digest: Top launches #213');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-325', 'MB-1', 'Your receipt from Amazon ($152.51)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-326', 'MB-1', 'Your receipt from Uber Receipts ($180.09)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-327', 'MB-1', 'Your receipt from REI Co-op ($192.48)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-328', 'MB-1', 'Your receipt from Apple ($226.65)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-329', 'MB-1', 'Your receipt from Amazon ($179.66)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-330', 'MB-1', 'Your receipt from Uber Receipts ($221.98)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-331', 'MB-1', 'Your receipt from REI Co-op ($14.73)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-332', 'MB-1', 'Your receipt from Apple ($116.02)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-333', 'MB-1', 'Your receipt from Amazon ($226.86)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-334', 'MB-1', 'Your receipt from Uber Receipts ($158.56)');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-335', 'MB-1', 'Standup notes');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-336', 'MB-1', 'Offsite logistics');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-337', 'MB-1', 'Hiring loop feedback');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-338', 'MB-1', 'Budget numbers for Q3');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-339', 'MB-1', 'Design review slides');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-340', 'MB-1', 'Release checklist');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-341', 'MB-1', 'Customer call recap');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-342', 'MB-1', 'Photos from the lake');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-343', 'MB-1', 'You have won a prize!!!');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-344', 'MB-1', 'Old coupon');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-345', 'MB-2', 'Salary review');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-346', 'MB-2', 'Invoice #4471 for May');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-347', 'MB-2', 'Weekend plans');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-348', 'MB-2', 'Vendor quote');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-349', 'MB-2', 'Team lunch');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-350', 'MB-2', 'Performance notes');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-351', 'MB-2', 'Doctor''s note');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-352', 'MB-3', 'Salary review');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-353', 'MB-3', 'Invoice #4471 for May');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-354', 'MB-3', 'Weekend plans');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-355', 'MB-3', 'Vendor quote');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-356', 'MB-3', 'Team lunch');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-357', 'MB-3', 'Performance notes');
INSERT INTO threads (thread_id, mailbox_id, subject) VALUES ('TH-358', 'MB-3', 'Doctor''s note');

-- messages
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1001', 'MB-1', 'TH-301', 'inbox', 'Rachel Adams', 'rachel.adams@brightpath.co', 'olivia.grant@lumenmail.com', '', 'Invoice #4471 for May', 'Hi Olivia,

Please find attached invoice #4471 for May consulting work: 32 hours, total $4,160.00, due June 15.

Thanks,
Rachel', '2025-06-01T16:20:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1002', 'MB-1', 'TH-302', 'inbox', 'Tom Becker', 'tom.becker@beckerproperties.com', 'olivia.grant@lumenmail.com', '', 'Lease renewal for 14 Alder St, Unit 3', 'Hello Olivia,

Your lease ends on July 31. Would you like to renew for 12 months at $2,150/month, or month-to-month at $2,400? Please let me know by June 10.

Regards,
Tom Becker
Becker Properties', '2025-05-30T10:05:00', 1, 1, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1003', 'MB-1', 'TH-303', 'inbox', 'Aurora Air', 'no-reply@auroraair.com', 'olivia.grant@lumenmail.com', '', 'Your Aurora Air booking QX7P2L', 'Booking confirmed. Confirmation code: QX7P2L. Seattle (SEA) to Lisbon (LIS), June 20, departs 18:45, seat 23C.', '2025-05-28T21:14:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1004', 'MB-1', 'TH-304', 'archive', 'Aurora Air', 'no-reply@auroraair.com', 'olivia.grant@lumenmail.com', '', 'Your Aurora Air booking ZP4M9K', 'Booking confirmed. Confirmation code: ZP4M9K. Seattle (SEA) to Denver (DEN), March 3, departs 07:10. This trip has been completed.', '2025-02-11T12:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1005', 'MB-1', 'TH-305', 'inbox', 'Aisha Khan', 'aisha.khan@northwind.io', 'olivia.grant@lumenmail.com', 'emily.chen@northwind.io', 'Q2 workshop agenda', 'Hi Olivia, here is a first agenda for the workshop on June 12: 9:00 intro, 10:00 customer interviews, 13:00 roadmap. Thoughts?', '2025-05-29T14:02:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1006', 'MB-1', 'TH-305', 'sent', 'Olivia Grant', 'olivia.grant@lumenmail.com', 'aisha.khan@northwind.io', 'emily.chen@northwind.io', 'Re: Q2 workshop agenda', 'Looks good. Could we move the roadmap part to 14:00?

Best,
Olivia', '2025-05-29T16:40:00', 1, 0, 'MSG-1005');
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1007', 'MB-1', 'TH-305', 'inbox', 'Emily Chen', 'emily.chen@northwind.io', 'olivia.grant@lumenmail.com', 'aisha.khan@northwind.io', 'Re: Q2 workshop agenda', '14:00 works for me. Aisha, can you book the big room?', '2025-05-30T08:55:00', 0, 0, 'MSG-1006');
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1008', 'MB-1', 'TH-306', 'inbox', 'Rachel Addams', 'r.addams@fernwood.org', 'olivia.grant@lumenmail.com', '', 'Library book hold ready', 'Dear patron, the book you reserved (''The Overstory'') is ready for pickup at Fernwood Library until June 7.', '2025-05-31T11:30:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1009', 'MB-1', 'TH-307', 'inbox', 'Dana Whitaker', 'dana.whitaker@gmail.com', 'olivia.grant@lumenmail.com', '', 'Dinner Friday?', 'Hey! Are you free for dinner this Friday? I was thinking Lola''s at 7.', '2025-06-01T19:48:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1010', 'MB-1', 'TH-308', 'inbox', 'Helen Park', 'helen.park@stmarys-school.org', 'olivia.grant@lumenmail.com', '', 'School trip permission form', 'Dear parents, please return the signed permission form for the aquarium trip by Wednesday June 4.', '2025-05-27T07:30:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1011', 'MB-1', 'TH-309', 'inbox', 'Chris Moreno', 'chris.moreno@brightpath.co', 'olivia.grant@lumenmail.com', '', 'Contract draft v3', 'Olivia, v3 of the services contract is attached with your comments addressed. Clause 7 (termination) is now 30 days.', '2025-05-26T17:12:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1012', 'MB-1', 'TH-310', 'inbox', 'City Clinic', 'reminders@cityclinic.com', 'olivia.grant@lumenmail.com', '', 'Appointment reminder', 'Reminder: you have an appointment with Dr. Priya Shah on June 9 at 15:30.', '2025-06-01T06:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1101', 'MB-1', 'TH-311', 'inbox', 'The Daily Brief', 'news@dailybrief.com', 'olivia.grant@lumenmail.com', '', 'The Daily Brief: Markets rally #200', 'This week''s issue of The Daily Brief. Read online or unsubscribe anytime.', '2025-05-20T06:30:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1102', 'MB-1', 'TH-312', 'inbox', 'Product Hunt Digest', 'digest@producthunt.com', 'olivia.grant@lumenmail.com', '', 'Product Hunt Digest: Top launches #201', 'This week''s issue of Product Hunt Digest. Read online or unsubscribe anytime.', '2025-05-21T04:06:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1103', 'MB-1', 'TH-313', 'inbox', 'Seattle Eats', 'hello@seattleeats.com', 'olivia.grant@lumenmail.com', '', 'Seattle Eats: Best new brunch spots #202', 'This week''s issue of Seattle Eats. Read online or unsubscribe anytime.', '2025-05-22T01:42:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1104', 'MB-1', 'TH-314', 'inbox', 'The Daily Brief', 'news@dailybrief.com', 'olivia.grant@lumenmail.com', '', 'The Daily Brief: Rates on hold #203', 'This week''s issue of The Daily Brief. Read online or unsubscribe anytime.', '2025-05-22T23:18:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1105', 'MB-1', 'TH-315', 'inbox', 'Product Hunt Digest', 'digest@producthunt.com', 'olivia.grant@lumenmail.com', '', 'Product Hunt Digest: AI tools roundup #204', 'This week''s issue of Product Hunt Digest. Read online or unsubscribe anytime.', '2025-05-23T20:54:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1106', 'MB-1', 'TH-316', 'inbox', 'Seattle Eats', 'hello@seattleeats.com', 'olivia.grant@lumenmail.com', '', 'Seattle Eats: Food truck guide #205', 'This week''s issue of Seattle Eats. Read online or unsubscribe anytime.', '2025-05-24T18:30:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1107', 'MB-1', 'TH-317', 'inbox', 'The Daily Brief', 'news@dailybrief.com', 'olivia.grant@lumenmail.com', '', 'The Daily Brief: Markets rally #206', 'This week''s issue of The Daily Brief. Read online or unsubscribe anytime.', '2025-05-25T16:06:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1108', 'MB-1', 'TH-318', 'inbox', 'Product Hunt Digest', 'digest@producthunt.com', 'olivia.grant@lumenmail.com', '', 'Product Hunt Digest: Top launches #207', 'This week''s issue of Product Hunt Digest. Read online or unsubscribe anytime.', '2025-05-26T13:42:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1109', 'MB-1', 'TH-319', 'inbox', 'Seattle Eats', 'hello@seattleeats.com', 'olivia.grant@lumenmail.com', '', 'Seattle Eats: Best new brunch spots #208', 'This week''s issue of Seattle Eats. Read online or unsubscribe anytime.', '2025-05-27T11:18:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1110', 'MB-1', 'TH-320', 'inbox', 'The Daily Brief', 'news@dailybrief.com', 'olivia.grant@lumenmail.com', '', 'The Daily Brief: Rates on hold #209', 'This week''s issue of The Daily Brief. Read online or unsubscribe anytime.', '2025-05-28T08:54:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1111', 'MB-1', 'TH-321', 'inbox', 'Product Hunt Digest', 'digest@producthunt.com', 'olivia.grant@lumenmail.com', '', 'Product Hunt Digest: AI tools roundup #210', 'This week''s issue of Product Hunt Digest. Read online or unsubscribe anytime.', '2025-05-29T06:30:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1112', 'MB-1', 'TH-322', 'inbox', 'Seattle Eats', 'hello@seattleeats.com', 'olivia.grant@lumenmail.com', '', 'Seattle Eats: Food truck guide #211', 'This week''s issue of Seattle Eats. Read online or unsubscribe anytime.', '2025-05-30T04:06:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1113', 'MB-1', 'TH-323', 'inbox', 'The Daily Brief', 'news@dailybrief.com', 'olivia.grant@lumenmail.com', '', 'The Daily Brief: Markets rally #212', 'This week''s issue of The Daily Brief. Read online or unsubscribe anytime.', '2025-05-31T01:42:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1114', 'MB-1', 'TH-324', 'inbox', 'Product Hunt Digest', 'digest@producthunt.com', 'olivia.grant@lumenmail.com', '', 'Product Hunt Digest: Top launches #213', 'This week''s issue of Product Hunt Digest. Read online or unsubscribe anytime.', '2025-05-31T23:18:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1115', 'MB-1', 'TH-325', 'archive', 'Amazon', 'auto-confirm@amazon.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Amazon ($152.51)', 'Thanks for your purchase. Total charged: $152.51.', '2025-05-03T12:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1116', 'MB-1', 'TH-326', 'archive', 'Uber Receipts', 'uber.us@uber.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Uber Receipts ($180.09)', 'Thanks for your purchase. Total charged: $180.09.', '2025-05-06T04:48:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1117', 'MB-1', 'TH-327', 'archive', 'REI Co-op', 'orders@rei.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from REI Co-op ($192.48)', 'Thanks for your purchase. Total charged: $192.48.', '2025-05-08T21:36:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1118', 'MB-1', 'TH-328', 'archive', 'Apple', 'no_reply@email.apple.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Apple ($226.65)', 'Thanks for your purchase. Total charged: $226.65.', '2025-05-11T14:24:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1119', 'MB-1', 'TH-329', 'inbox', 'Amazon', 'auto-confirm@amazon.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Amazon ($179.66)', 'Thanks for your purchase. Total charged: $179.66.', '2025-05-14T07:12:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1120', 'MB-1', 'TH-330', 'inbox', 'Uber Receipts', 'uber.us@uber.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Uber Receipts ($221.98)', 'Thanks for your purchase. Total charged: $221.98.', '2025-05-17T00:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1121', 'MB-1', 'TH-331', 'inbox', 'REI Co-op', 'orders@rei.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from REI Co-op ($14.73)', 'Thanks for your purchase. Total charged: $14.73.', '2025-05-19T16:48:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1122', 'MB-1', 'TH-332', 'inbox', 'Apple', 'no_reply@email.apple.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Apple ($116.02)', 'Thanks for your purchase. Total charged: $116.02.', '2025-05-22T09:36:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1123', 'MB-1', 'TH-333', 'inbox', 'Amazon', 'auto-confirm@amazon.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Amazon ($226.86)', 'Thanks for your purchase. Total charged: $226.86.', '2025-05-25T02:24:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1124', 'MB-1', 'TH-334', 'inbox', 'Uber Receipts', 'uber.us@uber.com', 'olivia.grant@lumenmail.com', '', 'Your receipt from Uber Receipts ($158.56)', 'Thanks for your purchase. Total charged: $158.56.', '2025-05-27T19:12:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1125', 'MB-1', 'TH-335', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'olivia.grant@lumenmail.com', '', 'Standup notes', 'Hi Olivia, sharing the standup notes. Let me know if anything is missing.', '2025-05-21T09:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1126', 'MB-1', 'TH-335', 'sent', 'Olivia Grant', 'olivia.grant@lumenmail.com', 'marco.bellini@lumenmail.com', '', 'Re: Standup notes', 'Thanks, looks good to me.

Best,
Olivia', '2025-05-21T11:00:00', 1, 0, 'MSG-1125');
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1127', 'MB-1', 'TH-336', 'inbox', 'Jonas Weber', 'jonas.weber@lumenmail.com', 'olivia.grant@lumenmail.com', '', 'Offsite logistics', 'Hi Olivia, sharing the offsite logistics. Let me know if anything is missing.', '2025-05-22T10:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1128', 'MB-1', 'TH-337', 'inbox', 'Ben Carter', 'ben.carter@lumenmail.com', 'olivia.grant@lumenmail.com', '', 'Hiring loop feedback', 'Hi Olivia, sharing the hiring loop feedback. Let me know if anything is missing.', '2025-05-23T11:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1129', 'MB-1', 'TH-337', 'sent', 'Olivia Grant', 'olivia.grant@lumenmail.com', 'ben.carter@lumenmail.com', '', 'Re: Hiring loop feedback', 'Thanks, looks good to me.

Best,
Olivia', '2025-05-23T13:00:00', 1, 0, 'MSG-1128');
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1130', 'MB-1', 'TH-338', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'olivia.grant@lumenmail.com', '', 'Budget numbers for Q3', 'Hi Olivia, sharing the budget numbers for q3. Let me know if anything is missing.', '2025-05-24T12:00:00', 1, 1, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1131', 'MB-1', 'TH-339', 'inbox', 'Jonas Weber', 'jonas.weber@lumenmail.com', 'olivia.grant@lumenmail.com', '', 'Design review slides', 'Hi Olivia, sharing the design review slides. Let me know if anything is missing.', '2025-05-25T09:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1132', 'MB-1', 'TH-339', 'sent', 'Olivia Grant', 'olivia.grant@lumenmail.com', 'jonas.weber@lumenmail.com', '', 'Re: Design review slides', 'Thanks, looks good to me.

Best,
Olivia', '2025-05-25T11:00:00', 1, 0, 'MSG-1131');
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1133', 'MB-1', 'TH-340', 'inbox', 'Ben Carter', 'ben.carter@lumenmail.com', 'olivia.grant@lumenmail.com', '', 'Release checklist', 'Hi Olivia, sharing the release checklist. Let me know if anything is missing.', '2025-05-26T10:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1134', 'MB-1', 'TH-341', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'olivia.grant@lumenmail.com', '', 'Customer call recap', 'Hi Olivia, sharing the customer call recap. Let me know if anything is missing.', '2025-05-27T11:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1135', 'MB-1', 'TH-341', 'sent', 'Olivia Grant', 'olivia.grant@lumenmail.com', 'marco.bellini@lumenmail.com', '', 'Re: Customer call recap', 'Thanks, looks good to me.

Best,
Olivia', '2025-05-27T13:00:00', 1, 0, 'MSG-1134');
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1136', 'MB-1', 'TH-342', 'sent', 'Olivia Grant', 'olivia.grant@lumenmail.com', 'lucy.grant@gmail.com', '', 'Photos from the lake', 'Here are the photos from last weekend!', '2025-05-25T20:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1137', 'MB-1', 'TH-343', 'spam', 'Prize Center', 'winner@prize-center.biz', 'olivia.grant@lumenmail.com', '', 'You have won a prize!!!', 'Click here to claim your $1,000 gift card.', '2025-05-31T03:12:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1138', 'MB-1', 'TH-344', 'trash', 'Seattle Eats', 'hello@seattleeats.com', 'olivia.grant@lumenmail.com', '', 'Old coupon', '20% off expired coupon.', '2025-04-02T09:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1139', 'MB-2', 'TH-345', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'ben.carter@lumenmail.com', '', 'Salary review', 'Private message for Ben Carter about salary review.', '2025-05-25T10:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1140', 'MB-2', 'TH-346', 'inbox', 'Rachel Adams', 'rachel.adams@brightpath.co', 'ben.carter@lumenmail.com', '', 'Invoice #4471 for May', 'Private message for Ben Carter about invoice #4471 for may.', '2025-05-26T11:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1141', 'MB-2', 'TH-347', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'ben.carter@lumenmail.com', '', 'Weekend plans', 'Private message for Ben Carter about weekend plans.', '2025-05-27T12:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1142', 'MB-2', 'TH-348', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'ben.carter@lumenmail.com', '', 'Vendor quote', 'Private message for Ben Carter about vendor quote.', '2025-05-28T13:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1143', 'MB-2', 'TH-349', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'ben.carter@lumenmail.com', '', 'Team lunch', 'Private message for Ben Carter about team lunch.', '2025-05-29T14:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1144', 'MB-2', 'TH-350', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'ben.carter@lumenmail.com', '', 'Performance notes', 'Private message for Ben Carter about performance notes.', '2025-05-30T15:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1145', 'MB-2', 'TH-351', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'ben.carter@lumenmail.com', '', 'Doctor''s note', 'Private message for Ben Carter about doctor''s note.', '2025-05-31T16:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1146', 'MB-3', 'TH-352', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'nora.lindqvist@lumenmail.com', '', 'Salary review', 'Private message for Nora Lindqvist about salary review.', '2025-05-25T10:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1147', 'MB-3', 'TH-353', 'inbox', 'Rachel Adams', 'rachel.adams@brightpath.co', 'nora.lindqvist@lumenmail.com', '', 'Invoice #4471 for May', 'Private message for Nora Lindqvist about invoice #4471 for may.', '2025-05-26T11:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1148', 'MB-3', 'TH-354', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'nora.lindqvist@lumenmail.com', '', 'Weekend plans', 'Private message for Nora Lindqvist about weekend plans.', '2025-05-27T12:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1149', 'MB-3', 'TH-355', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'nora.lindqvist@lumenmail.com', '', 'Vendor quote', 'Private message for Nora Lindqvist about vendor quote.', '2025-05-28T13:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1150', 'MB-3', 'TH-356', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'nora.lindqvist@lumenmail.com', '', 'Team lunch', 'Private message for Nora Lindqvist about team lunch.', '2025-05-29T14:00:00', 0, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1151', 'MB-3', 'TH-357', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'nora.lindqvist@lumenmail.com', '', 'Performance notes', 'Private message for Nora Lindqvist about performance notes.', '2025-05-30T15:00:00', 1, 0, NULL);
INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, body, sent_at, is_read, is_starred, in_reply_to) VALUES ('MSG-1152', 'MB-3', 'TH-358', 'inbox', 'Marco Bellini', 'marco.bellini@lumenmail.com', 'nora.lindqvist@lumenmail.com', '', 'Doctor''s note', 'Private message for Nora Lindqvist about doctor''s note.', '2025-05-31T16:00:00', 0, 0, NULL);

-- message_labels
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1003', 'LBL-13');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1004', 'LBL-13');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1005', 'LBL-14');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1007', 'LBL-14');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1009', 'LBL-12');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1010', 'LBL-12');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1011', 'LBL-14');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1101', 'LBL-16');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1104', 'LBL-16');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1107', 'LBL-16');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1110', 'LBL-16');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1113', 'LBL-16');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1115', 'LBL-15');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1117', 'LBL-15');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1119', 'LBL-15');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1121', 'LBL-15');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1123', 'LBL-15');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1130', 'LBL-11');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1136', 'LBL-12');
INSERT INTO message_labels (message_id, label_id) VALUES ('MSG-1140', 'LBL-21');

-- drafts
INSERT INTO drafts (draft_id, mailbox_id, thread_id, in_reply_to, to_addrs, cc_addrs, subject, body, updated_at) VALUES ('DRF-301', 'MB-1', NULL, NULL, 'lucy.grant@gmail.com', '', 'Lisbon trip itinerary', 'Hi Lucy, I land in Lisbon on June 21 in the morning. Want to meet for lunch?', '2025-05-31T22:10:00');
INSERT INTO drafts (draft_id, mailbox_id, thread_id, in_reply_to, to_addrs, cc_addrs, subject, body, updated_at) VALUES ('DRF-302', 'MB-1', NULL, NULL, '', '', 'Ideas for the offsite', '- boat tour
- cooking class', '2025-05-24T13:00:00');
INSERT INTO drafts (draft_id, mailbox_id, thread_id, in_reply_to, to_addrs, cc_addrs, subject, body, updated_at) VALUES ('DRF-303', 'MB-1', NULL, NULL, 'jonas.weber@lumenmail.com', 'marco.bellini@lumenmail.com', 'Release checklist', 'Jonas, I added two items to the checklist.', '2025-05-29T18:30:00');
INSERT INTO drafts (draft_id, mailbox_id, thread_id, in_reply_to, to_addrs, cc_addrs, subject, body, updated_at) VALUES ('DRF-401', 'MB-2', NULL, NULL, 'olivia.grant@lumenmail.com', '', 'Quick question', 'Do you have the Q3 numbers?', '2025-06-01T08:00:00');
